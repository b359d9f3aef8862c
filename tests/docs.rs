//! The documentation keeps its promises (issue #15): the README stays short enough to read
//! in a few minutes, every "SPEC §n" reference in the repository names a section that
//! exists in `docs/spec.md`, no document points at a file outside the repository, and
//! `docs/README.md` indexes every document while every local link resolves, the tests
//! the pages name as evidence exist, and `docs/tests.md` lists every test with its doc
//! comment as the sources say (it is generated from them).
//!
//! A plain scan over the files with the standard library: no regex, no markdown parser.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

/// Most lines the README may have.
const README_MAX_LINES: usize = 200;

/// Folders never walked: build output, version control, installed packages.
const SKIPPED_DIRS: [&str; 3] = ["target", ".git", "node_modules"];

/// File kinds that may cite the specification.
const CITING_EXTENSIONS: [&str; 6] = ["rs", "md", "toml", "yaml", "json", "sh"];

/// Text that would point a reader outside the repository.
const OUTSIDE_MARKERS: [&str; 3] = ["../shared/", "/work/", "seeds/"];

/// The repository root: this crate lives in `tests/`.
fn root() -> PathBuf {
    continuity_tests::workspace_root()
}

fn read(path: &Path) -> String {
    let bytes = fs::read(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    String::from_utf8_lossy(&bytes).into_owned()
}

/// `path` relative to the repository root, for failure messages.
fn shown(root: &Path, path: &Path) -> String {
    path.strip_prefix(root).unwrap_or(path).display().to_string()
}

/// Every file under `dir` whose extension is one of `extensions`, in a stable order.
/// Symbolic links are not followed, so a link cannot make the walk loop.
fn files(dir: &Path, extensions: &[&str], out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("listing {}: {e}", dir.display()))
        .map(|entry| entry.expect("a directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        let kind = fs::symlink_metadata(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())).file_type();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        if kind.is_dir() {
            if !SKIPPED_DIRS.contains(&name) {
                files(&path, extensions, out);
            }
        } else if kind.is_file() && path.extension().and_then(|e| e.to_str()).is_some_and(|e| extensions.contains(&e)) {
            out.push(path);
        }
    }
}

/// The `*.md` files directly in `docs/`.
fn docs_pages(root: &Path) -> Vec<PathBuf> {
    let mut pages: Vec<PathBuf> = fs::read_dir(root.join("docs"))
        .expect("the docs folder")
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "md"))
        .collect();
    pages.sort();
    pages
}

/// A section number at the start of `s` (`7` or `7.3`) and its length in bytes.
fn section_at(s: &str) -> Option<(String, usize)> {
    let major = s.bytes().take_while(u8::is_ascii_digit).count();
    if major == 0 {
        return None;
    }
    let minor = s[major..].strip_prefix('.').map_or(0, |after| after.bytes().take_while(u8::is_ascii_digit).count());
    let len = if minor > 0 { major + 1 + minor } else { major };
    Some((s[..len].to_owned(), len))
}

/// Where the clause that follows a reference ends: a closing bracket, a semicolon, a full
/// stop that is not part of a number, or the next "SPEC".
fn clause_end(s: &str) -> usize {
    let b = s.as_bytes();
    for (i, &c) in b.iter().enumerate() {
        match c {
            b')' | b']' | b';' => return i,
            b'.' if !b.get(i + 1).is_some_and(u8::is_ascii_digit) => return i,
            _ if b[i..].starts_with(b"SPEC") => return i,
            _ => {}
        }
    }
    b.len()
}

/// The section numbers a line cites: each `SPEC §n` / `SPEC §n.m`, and the `§n` items of a
/// list that follows one (`SPEC §3, §6, §10`; `SPEC §2.1 write path, §4.5`). A `§` that
/// no "SPEC" introduces (an RFC's section, say) is not ours and is left alone.
fn spec_references(line: &str) -> Vec<String> {
    const MARK: &str = "SPEC §";
    const LIST_ITEM: &str = ", §";
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(at) = line[from..].find(MARK) {
        let start = from + at + MARK.len();
        from = start;
        let Some((number, len)) = section_at(&line[start..]) else { continue };
        found.push(number);
        let rest = &line[start + len..];
        let clause = &rest[..clause_end(rest)];
        let mut i = 0;
        while let Some(k) = clause[i..].find(LIST_ITEM) {
            i += k + LIST_ITEM.len();
            if let Some((number, len)) = section_at(&clause[i..]) {
                found.push(number);
                i += len;
            }
        }
        from = start + len;
    }
    found
}

/// Whether `docs/spec.md` has the heading of section `number`: `## 7. …` for a section,
/// `### 7.3 …` for a subsection.
fn has_heading(headings: &[&str], number: &str) -> bool {
    let prefix = if number.contains('.') { format!("### {number}") } else { format!("## {number}.") };
    headings.iter().any(|h| h.strip_prefix(prefix.as_str()).is_some_and(|rest| rest.is_empty() || rest.starts_with(' ')))
}

/// The targets of the markdown links of `text` — `[label](target)` — outside code: fenced
/// blocks and inline code spans are skipped. A title after the target is dropped.
fn link_targets(text: &str) -> Vec<(usize, String)> {
    let mut targets = Vec::new();
    let mut fenced = false;
    for (n, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        // The line without its inline code spans.
        let prose: String = line.split('`').step_by(2).collect::<Vec<_>>().join(" ");
        let mut rest = prose.as_str();
        while let Some(at) = rest.find("](") {
            rest = &rest[at + 2..];
            let Some(end) = rest.find(')') else { break };
            let target = rest[..end].split_whitespace().next().unwrap_or_default();
            if !target.is_empty() {
                targets.push((n + 1, target.to_owned()));
            }
            rest = &rest[end..];
        }
    }
    targets
}

/// The local file a link target names, relative to `page`'s folder, without its `#anchor`;
/// `None` for web links, mail links and anchors within the page.
fn local_target(page: &Path, target: &str) -> Option<PathBuf> {
    if target.starts_with('#') || target.contains("://") || target.starts_with("mailto:") {
        return None;
    }
    let file = target.split('#').next().unwrap_or_default();
    Some(page.parent().expect("a page's folder").join(file))
}

#[test]
fn readme_is_short() {
    let readme = read(&root().join("README.md"));
    let lines = readme.lines().count();
    assert!(
        lines <= README_MAX_LINES,
        "README.md has {lines} lines; keep it at most {README_MAX_LINES} and move details to docs/"
    );
}

#[test]
fn spec_references_resolve() {
    let root = root();
    let spec = read(&root.join("docs/spec.md"));
    let headings: Vec<&str> = spec.lines().filter(|l| l.starts_with('#')).collect();
    assert!(has_heading(&headings, "1") && has_heading(&headings, "7.3"), "docs/spec.md lost its numbered headings");

    let mut paths = Vec::new();
    files(&root, &CITING_EXTENSIONS, &mut paths);
    let mut cited = 0;
    let mut failures = Vec::new();
    for path in &paths {
        for (n, line) in read(path).lines().enumerate() {
            for number in spec_references(line) {
                cited += 1;
                if !has_heading(&headings, &number) {
                    failures.push(format!("{}:{}: SPEC §{number} has no heading in docs/spec.md", shown(&root, path), n + 1));
                }
            }
        }
    }
    assert!(cited > 0, "no SPEC reference found: is the walk looking at the repository?");
    assert!(failures.is_empty(), "references to missing sections:\n{}", failures.join("\n"));
}

#[test]
fn the_reference_scanner_reads_lists_and_ignores_other_sections() {
    assert_eq!(spec_references("(SPEC §7.3)."), ["7.3"]);
    assert_eq!(spec_references("// SPEC §3, §6, §10, wall 5"), ["3", "6", "10"]);
    assert_eq!(spec_references("pipeline (SPEC §2.1 write path, §4.5): more, §9"), ["2.1", "4.5"]);
    assert_eq!(spec_references("SPEC §6.3, §6.4; RFC 6749 §4.1.2, §5"), ["6.3", "6.4"]);
    assert_eq!(spec_references("RFC 9700 §4.11.2 and the word SPEC §n"), Vec::<String>::new());
    assert_eq!(spec_references("SPEC §9. SPEC §10)"), ["9", "10"]);
}

#[test]
fn no_reference_outside_the_repo() {
    let root = root();
    let mut pages = Vec::new();
    files(&root, &["md"], &mut pages);
    assert!(pages.iter().any(|p| p.ends_with("README.md")), "no markdown file found");
    let mut failures = Vec::new();
    for page in &pages {
        for (n, line) in read(page).lines().enumerate() {
            for marker in OUTSIDE_MARKERS {
                if line.contains(marker) {
                    failures.push(format!("{}:{}: `{marker}` points outside the repository", shown(&root, page), n + 1));
                }
            }
        }
    }
    assert!(failures.is_empty(), "documents that point outside the repository (use docs/spec.md):\n{}", failures.join("\n"));
}

#[test]
fn docs_index_lists_every_doc() {
    let root = root();
    let index = root.join("docs/README.md");
    let linked: BTreeSet<PathBuf> = link_targets(&read(&index))
        .iter()
        .filter_map(|(_, target)| local_target(&index, target))
        .filter_map(|p| p.canonicalize().ok())
        .collect();
    let pages = docs_pages(&root);
    let mut failures: Vec<String> = pages
        .iter()
        .filter(|p| **p != index)
        .filter(|p| !linked.contains(&p.canonicalize().expect("a docs page")))
        .map(|p| format!("{} is not linked from docs/README.md", shown(&root, p)))
        .collect();

    for page in std::iter::once(root.join("README.md")).chain(pages) {
        for (n, target) in link_targets(&read(&page)) {
            if let Some(file) = local_target(&page, &target)
                && !file.exists()
            {
                failures.push(format!("{}:{n}: the link to `{target}` names no file", shown(&root, &page)));
            }
        }
    }
    assert!(failures.is_empty(), "documentation index and links:\n{}", failures.join("\n"));
}

/// `a{b,c}d` → `abd`, `acd` (every group, one level each).
fn expand_braces(s: &str) -> Vec<String> {
    let (Some(open), Some(close)) = (s.find('{'), s.find('}')) else { return vec![s.to_owned()] };
    if close < open {
        return vec![s.to_owned()];
    }
    s[open + 1..close].split(',').flat_map(|alt| expand_braces(&format!("{}{alt}{}", &s[..open], &s[close + 1..]))).collect()
}

/// A backticked name that reads as a test's (or another function's): lower-case words
/// joined by at least three underscores, as `every_error_says_what_to_do_next`.
fn test_like(name: &str) -> bool {
    name.matches('_').count() >= 3
        && !name.starts_with('_')
        && !name.ends_with('_')
        && !name.contains("__")
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// The pages that name tests as evidence (docs/testing.md, docs/security.md) name only
/// tests that exist: a test renamed or removed fails this until its page says so.
#[test]
fn tests_named_in_the_docs_exist() {
    let root = root();
    let mut sources = Vec::new();
    for dir in ["shared", "functions", "tests"] {
        files(&root.join(dir), &["rs"], &mut sources);
    }
    let mut words = BTreeSet::new();
    for f in &sources {
        for w in read(f).split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
            if test_like(w) {
                words.insert(w.to_owned());
            }
        }
    }
    let mut named = 0;
    let mut stale = Vec::new();
    for page in ["docs/testing.md", "docs/security.md"] {
        let text = read(&root.join(page));
        for (i, span) in text.split('`').enumerate() {
            if i % 2 == 0 || span.contains('\n') {
                continue;
            }
            for e in expand_braces(span) {
                let last = e.trim().rsplit(|c: char| c == ':' || c.is_whitespace()).next().unwrap_or_default();
                if test_like(last) {
                    named += 1;
                    if !words.contains(last) {
                        stale.push(format!("{page}: `{span}` ({last})"));
                    }
                }
            }
        }
    }
    assert!(named >= 40, "the scan found the tests the pages name: {named}");
    assert!(stale.is_empty(), "tests named in the docs that no source holds:\n{}", stale.join("\n"));
}

#[test]
fn brace_groups_expand_and_test_names_are_recognised() {
    assert_eq!(expand_braces("a_{x,y}_b"), ["a_x_b", "a_y_b"]);
    assert_eq!(expand_braces("plain"), ["plain"]);
    assert!(test_like("every_error_says_what_to_do_next"));
    assert!(!test_like("memory_search") && !test_like("Not_A_Test_Name") && !test_like("a__b_c_d"));
}

/// A package's name, from its manifest's `[package]` table.
fn package_name(manifest: &Path) -> String {
    let text = read(manifest);
    let package = text.split("[package]").nth(1).unwrap_or_default();
    let line = package.lines().find(|l| l.trim_start().starts_with("name")).unwrap_or_default();
    line.split('"').nth(1).unwrap_or_default().to_owned()
}

/// The folders holding integration tests, each with its package's name: the workspace's
/// own test crate (its manifest in `tests/`), and each crate's `tests/` beside its manifest.
fn test_dirs(root: &Path) -> Vec<(String, PathBuf)> {
    let mut dirs: Vec<PathBuf> = vec![root.join("tests")];
    for parent in ["functions", "shared"] {
        dirs.extend(fs::read_dir(root.join(parent)).unwrap().map(|e| e.unwrap().path().join("tests")).filter(|p| p.is_dir()));
    }
    dirs.into_iter()
        .map(|dir| {
            let manifest = if dir == root.join("tests") { dir.join("Cargo.toml") } else { dir.join("../Cargo.toml") };
            (package_name(&manifest), dir)
        })
        .collect()
}

/// The test files of one folder: (module name, path relative to it), without `it.rs`.
fn test_files(dir: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().and_then(|s| s.to_str()).unwrap_or_default().to_owned();
        if let Some(stem) = name.strip_suffix(".rs") {
            if stem != "it" {
                out.push((stem.to_owned(), name.clone()));
            }
        } else if path.join("main.rs").is_file() {
            out.push((name.clone(), format!("{name}/main.rs")));
        }
    }
    out.sort();
    out
}

/// A crate whose tests are one binary (`autotests = false`, `it.rs`) runs only the files
/// `it.rs` declares: a file added beside it and not declared would never run.
#[test]
fn every_test_file_is_a_module_of_the_one_binary() {
    let root = root();
    let mut merged = 0;
    for (package, dir) in test_dirs(&root) {
        let Ok(it) = fs::read_to_string(dir.join("it.rs")) else { continue };
        merged += 1;
        for (name, path) in test_files(&dir) {
            let declared = format!("#[path = \"{path}\"]\nmod {name};");
            assert!(it.contains(&declared), "{package}: tests/it.rs does not declare {path} ({declared})");
        }
    }
    assert!(merged >= 6, "the crates with one test binary were found: {merged}");
}

/// Tests find the repository at run time (`CARGO_MANIFEST_DIR` as cargo and nextest set
/// it when they run a test), never by the path they were compiled in: a shared cargo
/// target folder keeps a test binary built in another clone of the same sources, and
/// that clone may be gone (the compile-time path is only a fallback).
#[test]
fn tests_find_the_repository_at_run_time() {
    let root = root();
    let mut files = Vec::new();
    let mut stack: Vec<PathBuf> = test_dirs(&root).into_iter().map(|(_, dir)| dir).collect();
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    assert!(files.len() >= 60, "the walk found the test files: {}", files.len());
    // `continuity_tests::manifest_dir` is the one reader of the variable, at run time.
    let reader = root.join("tests/support/lib.rs");
    assert!(read(&reader).contains("env::var_os(\"CARGO_MANIFEST_DIR\")"), "the helper reads it at run time");
    for path in files.iter().filter(|p| **p != reader) {
        for (n, line) in read(path).lines().enumerate() {
            assert!(
                !line.contains("CARGO_MANIFEST_DIR\")"),
                "{}:{}: reads CARGO_MANIFEST_DIR itself ({line}); use continuity_tests::workspace_root or manifest_dir",
                path.display(),
                n + 1
            );
        }
    }
}

/// One test as the inventory shows it: its name and its doc comment (one line).
struct Listed {
    name: String,
    doc: String,
}

/// The `///` lines of a doc comment, joined into one line.
fn joined(lines: &[&str]) -> String {
    lines.iter().map(|l| l.trim_start().trim_start_matches("///").trim()).filter(|l| !l.is_empty()).collect::<Vec<_>>().join(" ")
}

/// The `///` lines right above line `at`.
fn doc_above<'a>(lines: &[&'a str], at: usize) -> Vec<&'a str> {
    let mut first = at;
    while first > 0 && lines[first - 1].trim_start().starts_with("///") {
        first -= 1;
    }
    lines[first..at].to_vec()
}

/// The tests a source file declares (`#[test]`, `#[tokio::test…]`), in order, each with
/// its doc comment — the `///` lines above its attributes or between them and the `fn`.
/// A test a macro declares for each name of a list (`$check`) is not one: the contract
/// suites are listed from their macro instead ([`contract_checks`]).
fn tests_in(text: &str) -> Vec<Listed> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let t = line.trim_start();
        if !(t.starts_with("#[test]") || t.starts_with("#[tokio::test")) {
            continue;
        }
        let mut above = i;
        while above > 0 && lines[above - 1].trim_start().starts_with("#[") {
            above -= 1;
        }
        let mut doc = doc_above(&lines, above);
        let mut j = i + 1;
        while j < lines.len() && !lines[j].contains("fn ") {
            if lines[j].trim_start().starts_with("///") {
                doc.push(lines[j]);
            }
            j += 1;
        }
        let Some(after) = lines.get(j).and_then(|l| l.split("fn ").nth(1)) else { continue };
        let name: String = after.chars().take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '$').collect();
        if !name.is_empty() && !name.starts_with('$') {
            out.push(Listed { name, doc: joined(&doc) });
        }
    }
    out
}

/// A file's `//!` doc, its first paragraph on one line.
fn file_doc(text: &str) -> String {
    let lines: Vec<&str> = text
        .lines()
        .take_while(|l| l.starts_with("//!"))
        .map(|l| l.trim_start_matches("//!"))
        .take_while(|l| !l.trim().is_empty())
        .collect();
    lines.iter().map(|l| l.trim()).collect::<Vec<_>>().join(" ")
}

/// The contract suites: each `(suite, $make:path)` arm of `contract_suite!` and the
/// checks it lists, each with the doc comment of its `pub async fn` in the suite's source.
fn contract_checks(root: &Path) -> Vec<(String, Vec<Listed>)> {
    let src = root.join("shared/contract/src");
    let lib = read(&src.join("lib.rs"));
    let mut sources = Vec::new();
    files(&src, &["rs"], &mut sources);
    let texts: Vec<String> = sources.iter().map(|p| read(p)).collect();
    let doc_of = |name: &str| -> String {
        for text in &texts {
            let lines: Vec<&str> = text.lines().collect();
            if let Some(at) = lines.iter().position(|l| l.trim_start().starts_with(&format!("pub async fn {name}("))) {
                return joined(&doc_above(&lines, at));
            }
        }
        String::new()
    };
    let mut out = Vec::new();
    for arm in lib.split("    (").skip(1) {
        let Some((suite, rest)) = arm.split_once(", $make:path) => {") else { continue };
        let Some(list) = rest.split('[').nth(1).and_then(|l| l.split(']').next()) else { continue };
        let checks = list
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|n| !n.is_empty())
            .map(|n| Listed { name: n.to_owned(), doc: doc_of(n) })
            .collect();
        out.push((suite.trim().to_owned(), checks));
    }
    out
}

/// `docs/tests.md` as the sources say it should read: every crate's tests, file by
/// file (integration tests, then unit tests in `src/`), each with its doc comment, and
/// the contract suites' checks.
fn test_inventory(root: &Path) -> String {
    let mut out = String::from(
        "# Every test\n\n\
         Generated from the sources by `tests/docs.rs` (`docs::the_test_inventory_is_current` fails when \
         this page is stale; `CONTINUITY_BLESS=1 cargo nextest run -p continuity-tests -E \
         'test(docs::the_test_inventory_is_current)'` rewrites it): every test function with its doc \
         comment, crate by crate and file by file. Do not edit it by hand. What the tests cover, and \
         how to run them: [testing.md](testing.md).\n",
    );
    let mut crates: Vec<PathBuf> = vec![root.join("tests")];
    for parent in ["shared", "functions"] {
        let mut dirs: Vec<PathBuf> = fs::read_dir(root.join(parent)).unwrap().map(|e| e.unwrap().path()).collect();
        dirs.sort();
        crates.extend(dirs.into_iter().filter(|d| d.join("Cargo.toml").is_file()));
    }
    let mut total = 0;
    for dir in crates {
        let package = package_name(&dir.join("Cargo.toml"));
        let mut sources = Vec::new();
        for sub in ["tests", "src", "support", "benches"] {
            let folder = dir.join(sub);
            if folder.is_dir() {
                files(&folder, &["rs"], &mut sources);
            }
        }
        // The workspace test crate's own test files are in its folder itself.
        if dir == root.join("tests") {
            let mut own: Vec<PathBuf> = fs::read_dir(&dir)
                .unwrap()
                .map(|e| e.unwrap().path())
                .filter(|p| p.extension().is_some_and(|e| e == "rs"))
                .collect();
            own.sort();
            sources.splice(0..0, own);
        }
        let mut section = String::new();
        for path in &sources {
            let text = read(path);
            let tests = tests_in(&text);
            if tests.is_empty() {
                continue;
            }
            total += tests.len();
            let doc = file_doc(&text);
            section.push_str(&format!("\n### `{}`\n\n", shown(root, path)));
            if !doc.is_empty() {
                section.push_str(&format!("{doc}\n\n"));
            }
            for t in tests {
                if t.doc.is_empty() {
                    section.push_str(&format!("- `{}`\n", t.name));
                } else {
                    section.push_str(&format!("- `{}` — {}\n", t.name, t.doc));
                }
            }
        }
        if package == "contract" {
            for (suite, checks) in contract_checks(root) {
                total += checks.len();
                section.push_str(&format!(
                    "\n### the `{suite}` suite (`contract_suite!`, run on both backends by `contract_embedded` and `contract_aws`)\n\n"
                ));
                for t in checks {
                    section.push_str(&format!("- `{}` — {}\n", t.name, t.doc));
                }
            }
        }
        if !section.is_empty() {
            out.push_str(&format!("\n## `{package}` ({})\n", shown(root, &dir)));
            out.push_str(&section);
        }
    }
    assert!(total >= 500, "the walk found the tests: {total}");
    out
}

/// `docs/tests.md` lists every test with its doc comment, as generated from the
/// sources: a test added, renamed, re-documented or removed fails this until the page
/// is generated again (`CONTINUITY_BLESS=1` rewrites it instead of failing).
#[test]
fn the_test_inventory_is_current() {
    let root = root();
    let path = root.join("docs/tests.md");
    let want = test_inventory(&root);
    if std::env::var_os("CONTINUITY_BLESS").is_some() {
        fs::write(&path, &want).unwrap();
        return;
    }
    let have = fs::read_to_string(&path).unwrap_or_default();
    if have != want {
        let line =
            have.lines().zip(want.lines()).position(|(a, b)| a != b).unwrap_or(have.lines().count().min(want.lines().count()));
        panic!(
            "docs/tests.md is stale from line {}: run `CONTINUITY_BLESS=1 cargo nextest run -p continuity-tests -E 'test(docs::the_test_inventory_is_current)'`\nnow:    {}\nwanted: {}",
            line + 1,
            have.lines().nth(line).unwrap_or("(end)"),
            want.lines().nth(line).unwrap_or("(end)")
        );
    }
}

#[test]
fn the_inventory_reads_tests_their_docs_and_macro_lists() {
    let src = "//! A file.\n//! Second line.\n//!\n//! More.\n\n/// Proves one thing\n/// well.\n#[test]\nfn one_thing() {}\n\n#[tokio::test(flavor = \"multi_thread\")]\n#[allow(x)]\n/// Inside.\nasync fn two() {}\n#[test]\nfn $check() {}\n";
    assert_eq!(file_doc(src), "A file. Second line.");
    let tests = tests_in(src);
    let seen: Vec<(&str, &str)> = tests.iter().map(|t| (t.name.as_str(), t.doc.as_str())).collect();
    assert_eq!(seen, [("one_thing", "Proves one thing well."), ("two", "Inside.")]);
    let suites = contract_checks(&root());
    assert!(suites.len() >= 8, "{}", suites.len());
    assert!(
        suites.iter().all(|(_, checks)| !checks.is_empty() && checks.iter().all(|c| !c.doc.is_empty() || c.name.contains('_')))
    );
}

/// The release archive's version is Cargo's; `CHANGELOG.md` has its section.
#[test]
fn the_changelog_has_a_section_for_this_version() {
    let version = env!("CARGO_PKG_VERSION");
    let changelog = read(&root().join("CHANGELOG.md"));
    assert!(
        changelog.lines().any(|l| l.starts_with(&format!("## {version} ")) || l == format!("## {version}")),
        "CHANGELOG.md has no `## {version}` section for the workspace version"
    );
}
