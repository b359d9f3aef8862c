// tests/packaging/ps1_syntax.cjs FILE.ps1... - a syntax check of PowerShell scripts
// where no PowerShell runs: each file is parsed with the tree-sitter PowerShell grammar
// (npm: web-tree-sitter, tree-sitter-powershell; found through NODE_PATH), and every
// ERROR or MISSING node is reported as FILE:LINE:COLUMN. It checks syntax only, not
// what PSScriptAnalyzer checks, nor behaviour (the release workflow runs the installer
// and PSScriptAnalyzer on Windows). Exit 0 when every file parses, 1 otherwise.
"use strict";
const fs = require("node:fs");

async function main(files) {
  const { Parser, Language } = require("web-tree-sitter");
  await Parser.init();
  const grammar = require.resolve("tree-sitter-powershell/tree-sitter-powershell.wasm");
  const parser = new Parser();
  parser.setLanguage(await Language.load(grammar));
  let errors = 0;
  for (const file of files) {
    const tree = parser.parse(fs.readFileSync(file, "utf8"));
    const walk = (node) => {
      if (node.isError || node.isMissing) {
        errors += 1;
        const p = node.startPosition;
        const near = JSON.stringify(node.text.slice(0, 60));
        console.log(`${file}:${p.row + 1}:${p.column + 1}: ${node.isMissing ? "missing " + node.type : "syntax error"} near ${near}`);
        return;
      }
      for (const child of node.children) walk(child);
    };
    if (tree.rootNode.hasError) walk(tree.rootNode);
  }
  return errors;
}

main(process.argv.slice(2)).then(
  (errors) => process.exit(errors ? 1 : 0),
  (e) => {
    console.error(`ps1_syntax: ${e.message} (npm install web-tree-sitter tree-sitter-powershell, and NODE_PATH=<its node_modules>)`);
    process.exit(2);
  },
);
