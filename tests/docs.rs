//! The documentation keeps its promises (issue #15): the README stays short enough to read
//! in a few minutes, every "SPEC §n" reference in the repository names a section that
//! exists in `docs/spec.md`, no document points at a file outside the repository, and
//! `docs/README.md` indexes every document while every local link resolves, the tests
//! the pages name as evidence exist, and `docs/testing.md` describes every test binary
//! and none that is gone.
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

/// Every integration-test file as `package::name`: each `tests/*.rs` of a package, and
/// each `tests/<name>/main.rs` — a module of the package's one test binary (`it.rs`,
/// itself not counted) where it has one, else a binary of its own.
fn test_binaries(root: &Path) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (package, dir) in test_dirs(root) {
        for (name, _) in test_files(&dir) {
            out.insert(format!("{package}::{name}"));
        }
    }
    out
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

/// docs/testing.md says what every test binary proves, and names none that is gone: a
/// test file added, renamed or removed fails this until the page says so.
#[test]
fn testing_md_covers_every_test_binary() {
    let root = root();
    let binaries = test_binaries(&root);
    assert!(binaries.len() >= 40, "the walk found the test binaries: {binaries:?}");
    let text = read(&root.join("docs/testing.md"));
    // A binary is described where the page names it in code (`crate::file`); an entry is
    // a list item naming its binaries before the dash ("- `crate::file` — …"), and every
    // binary an entry names must exist.
    let spans = |text: &str| -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        for (i, span) in text.split('`').enumerate() {
            if i % 2 == 1 && !span.contains('\n') {
                out.extend(expand_braces(span).into_iter().filter(|e| e.split("::").count() == 2));
            }
        }
        out
    };
    let named = spans(&text);
    let mut entries = BTreeSet::new();
    for line in text.lines().filter(|l| l.starts_with("- `")) {
        entries.extend(spans(line.split(" — ").next().unwrap_or_default()));
    }
    let missing: Vec<&String> = binaries.difference(&named).collect();
    // Entries also name unit-test modules (`services::graph`) and suites (`records::…`):
    // only a name in a package that has test binaries must be one of them.
    let packages: BTreeSet<&str> = binaries.iter().filter_map(|b| b.split("::").next()).collect();
    let gone: Vec<&String> =
        entries.difference(&binaries).filter(|e| e.split("::").next().is_some_and(|p| packages.contains(p))).collect();
    assert!(missing.is_empty(), "test binaries docs/testing.md does not describe: {missing:?}");
    assert!(gone.is_empty(), "docs/testing.md describes test binaries that do not exist: {gone:?}");
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
