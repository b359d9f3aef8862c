//! The layering the architecture promises, checked on the source itself (ARCHITECTURE.md):
//! edges — the HTTP gateway, the MCP surface, the Lambda functions and the CLI — call use
//! cases and never reach past them into the backend; each crate's `//!` map names every
//! module it declares, so the maps cannot drift from the code.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    continuity_tests::workspace_root()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let p = entry.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// No edge touches `services.backend`: what a request may do, audit and limit is decided
/// by the use cases (only the binaries' wiring builds a backend, and it never reaches into
/// a `Services` for one).
#[test]
fn edges_never_reach_the_backend() {
    let root = root();
    let mut files = Vec::new();
    for dir in ["shared/gateway/src", "shared/mcp/src"] {
        rust_files(&root.join(dir), &mut files);
    }
    for entry in std::fs::read_dir(root.join("functions")).unwrap().flatten() {
        rust_files(&entry.path().join("src"), &mut files);
    }
    assert!(files.len() > 20, "the walk found the edge crates: {}", files.len());
    let mut found = Vec::new();
    for f in files {
        for (i, line) in std::fs::read_to_string(&f).unwrap().lines().enumerate() {
            let code = line.split("//").next().unwrap_or_default();
            // `services.backend` itself, not an accessor such as `backend_name()`.
            let reaches = code.match_indices(".backend").any(|(i, _)| {
                let before = &code[..i];
                let after = code[i + ".backend".len()..].chars().next();
                (before.ends_with("services") || before.ends_with(" s") || before.ends_with("(s"))
                    && !after.is_some_and(|c| c == '_' || c.is_alphanumeric())
            });
            if reaches {
                found.push(format!("{}:{}: {}", f.display(), i + 1, line.trim()));
            }
        }
    }
    assert!(found.is_empty(), "edges reaching the backend:\n{}", found.join("\n"));
}

/// Each service is built once, by `Services::new`, which hands each the others it uses:
/// no other code (a service, an edge, a test) builds one of the types it builds. A
/// second `EntityService` once had its own change bus, and the entities an approval
/// wrote never reached subscribed sessions.
#[test]
fn services_are_built_once_by_services_new() {
    let root = root();
    let lib = std::fs::read_to_string(root.join("shared/services/src/lib.rs")).unwrap();
    let start = lib.find("    pub fn new(backend: Backend) -> Self {").expect("Services::new in services/src/lib.rs");
    let end = start + lib[start..].find("\n    }\n").expect("the end of Services::new");
    let mut built: Vec<String> = Vec::new();
    for (i, _) in lib[start..end].match_indices("::new(") {
        let before = &lib[start..start + i];
        let name: String =
            before.chars().rev().take_while(|c| c.is_alphanumeric() || *c == '_').collect::<String>().chars().rev().collect();
        // `Arc::new(ServiceSet { … })` is the handle, not a service.
        if name != "Arc" && !built.contains(&name) {
            built.push(name);
        }
    }
    for expected in ["EntityService", "SearchService", "GovernanceService", "MaintenanceService", "IngestService", "Changes"] {
        assert!(built.iter().any(|b| b == expected), "Services::new builds {expected}: {built:?}");
    }
    let mut files = Vec::new();
    for dir in ["shared", "functions", "tests"] {
        rust_files(&root.join(dir), &mut files);
    }
    let mut found = Vec::new();
    for f in &files {
        let rel = f.strip_prefix(&root).unwrap_or(f).display().to_string();
        if rel.ends_with("shared/services/src/lib.rs") || rel.ends_with("shared/services/src/changes.rs") {
            // The wiring itself; the change bus's own unit tests.
            continue;
        }
        for (i, line) in std::fs::read_to_string(f).unwrap().lines().enumerate() {
            let code = line.split("//").next().unwrap_or_default();
            for name in &built {
                // A whole `Services` (for a backend of its own) may be built anywhere.
                if code
                    .match_indices(&format!("{name}::new("))
                    .any(|(j, _)| !code[..j].ends_with(|c: char| c.is_alphanumeric() || c == '_'))
                {
                    found.push(format!("{rel}:{}: {}", i + 1, line.trim()));
                }
            }
        }
    }
    assert!(files.len() > 100, "the walk found the sources: {}", files.len());
    assert!(found.is_empty(), "services built outside Services::new:\n{}", found.join("\n"));
}

/// Every `pub mod x;` (or `mod x;`) of a crate's `lib.rs` is named in that file's `//!`
/// map (as `` [`x`] `` or `` `x` ``).
#[test]
fn crate_maps_name_every_module() {
    let root = root();
    let mut missing = Vec::new();
    let mut libs = Vec::new();
    for entry in std::fs::read_dir(root.join("shared")).unwrap().flatten() {
        let lib = entry.path().join("src/lib.rs");
        if lib.exists() {
            libs.push(lib);
        }
    }
    assert!(libs.len() >= 10, "{libs:?}");
    for lib in libs {
        let text = std::fs::read_to_string(&lib).unwrap();
        let docs: String = text.lines().filter(|l| l.starts_with("//!")).collect::<Vec<_>>().join("\n");
        for line in text.lines() {
            let l = line.trim();
            let name = l.strip_prefix("pub mod ").or_else(|| l.strip_prefix("mod ")).and_then(|r| r.strip_suffix(';'));
            if let Some(name) = name
                && !docs.contains(&format!("[`{name}`]"))
                && !docs.contains(&format!("`{name}`"))
            {
                missing.push(format!("{}: module {name}", lib.display()));
            }
        }
    }
    assert!(missing.is_empty(), "modules missing from their crate's map:\n{}", missing.join("\n"));
}

/// The workspace crates each crate's manifest depends on at run time (`[dependencies]`,
/// not dev or build).
fn manifest_deps(manifest: &Path, workspace: &[String]) -> Vec<String> {
    let text = std::fs::read_to_string(manifest).unwrap();
    let mut section = String::new();
    let mut deps = Vec::new();
    for line in text.lines() {
        let l = line.trim();
        if l.starts_with('[') {
            section = l.to_owned();
            continue;
        }
        if section != "[dependencies]" {
            continue;
        }
        let name = l.split(['=', '.', ' ']).next().unwrap_or_default();
        if workspace.iter().any(|w| w == name) && !deps.iter().any(|d| d == name) {
            deps.push(name.to_owned());
        }
    }
    deps.sort();
    deps
}

fn manifests(root: &Path) -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    let mut dirs = vec![root.join("tests")];
    for parent in ["shared", "functions"] {
        for e in std::fs::read_dir(root.join(parent)).unwrap().flatten() {
            dirs.push(e.path());
        }
    }
    for d in dirs {
        let m = d.join("Cargo.toml");
        if let Ok(text) = std::fs::read_to_string(&m) {
            let name = text
                .lines()
                .find_map(|l| l.trim().strip_prefix("name = \""))
                .and_then(|r| r.strip_suffix('"'))
                .expect("a package name")
                .to_owned();
            out.push((name, m));
        }
    }
    out
}

/// ARCHITECTURE.md's crate graph (its `crates` block) is the manifests' graph: every
/// crate listed, each with exactly the workspace crates it depends on.
#[test]
fn the_crate_graph_is_the_one_documented() {
    let root = root();
    let arch = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let block =
        arch.split("```crates\n").nth(1).and_then(|b| b.split("```").next()).expect("a ```crates block in ARCHITECTURE.md");
    let documented: Vec<(String, Vec<String>)> = block
        .lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(c, d)| {
            let mut d: Vec<String> = d.split_whitespace().map(str::to_owned).collect();
            d.sort();
            (c.trim().to_owned(), d)
        })
        .collect();
    let crates = manifests(&root);
    let names: Vec<String> = crates.iter().map(|(n, _)| n.clone()).collect();
    assert!(names.len() >= 20, "{names:?}");
    let mut wrong = Vec::new();
    for (name, manifest) in &crates {
        let actual = manifest_deps(manifest, &names);
        match documented.iter().find(|(c, _)| c == name) {
            Some((_, d)) if *d == actual => {}
            Some((_, d)) => wrong.push(format!("{name}: documented {d:?}, the manifest says {actual:?}")),
            None => wrong.push(format!("{name}: not in the crates block (depends on {actual:?})")),
        }
    }
    for (c, _) in &documented {
        if !names.contains(c) {
            wrong.push(format!("{c}: documented, but no such crate"));
        }
    }
    assert!(wrong.is_empty(), "ARCHITECTURE.md's crate graph is out of date:\n{}", wrong.join("\n"));
}

/// Only the embedded backend, the stdio bridge's offline store (in the `continuity`
/// binary), the sentence model's token-state cache (`embed`, linked by that binary only)
/// and the tests name SQLite.
#[test]
fn sqlite_stays_where_architecture_says() {
    let root = root();
    let crates = manifests(&root);
    let users: Vec<&str> = crates
        .iter()
        .filter(|(_, m)| std::fs::read_to_string(m).unwrap().lines().any(|l| l.trim_start().starts_with("rusqlite")))
        .map(|(n, _)| n.as_str())
        .collect();
    let mut users = users;
    users.sort_unstable();
    assert_eq!(users, ["continuity", "continuity-tests", "embed", "store-embedded"]);
    // The Rust files below `dir` that name SQLite, from the root.
    let naming = |dir: &str| -> Vec<String> {
        let mut files = Vec::new();
        rust_files(&root.join(dir), &mut files);
        files
            .iter()
            .filter(|f| std::fs::read_to_string(f).unwrap().contains("rusqlite"))
            .map(|f| f.strip_prefix(&root).unwrap_or(f).display().to_string())
            .collect()
    };
    assert_eq!(naming("shared/embed/src"), ["shared/embed/src/states.rs"], "in embed, only its token states' file");
    assert_eq!(naming("functions/local/src"), ["functions/local/src/bridge/store.rs"], "in the binary, only the bridge's store");
}

/// ARCHITECTURE.md's *Adding a tool* steps name files that exist and hold what each
/// step says to add there.
#[test]
fn the_add_a_tool_steps_are_true() {
    let root = root();
    let arch = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let steps = arch.split("#### Adding a tool").nth(1).and_then(|s| s.split("\n#").next()).expect("the Adding a tool section");
    for (path, holds) in [
        ("shared/services/src/tools/", "impl Capability for"),
        ("shared/services/src/capabilities/typed.rs", "macro_rules! for_each_capability"),
        ("shared/adk/src/policy.rs", "pub struct CapabilitySpec"),
        ("shared/mcp/src/render.rs", "pub trait Render"),
    ] {
        assert!(steps.contains(&format!("`{path}`")), "the steps name {path}");
        let p = root.join(path);
        let text = if p.is_dir() {
            let mut files = Vec::new();
            rust_files(&p, &mut files);
            files.iter().map(|f| std::fs::read_to_string(f).unwrap()).collect::<String>()
        } else {
            std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{path}: {e}"))
        };
        assert!(text.contains(holds), "{path} holds {holds}");
    }
    // Every capability type states its policy beside its handler and is registered
    // (steps 1-2 agree); no table of policies keyed by name is left anywhere.
    let typed = std::fs::read_to_string(root.join("shared/services/src/capabilities/typed.rs")).unwrap();
    let mut tools = Vec::new();
    rust_files(&root.join("shared/services/src/tools"), &mut tools);
    let (mut missing, mut checked) = (Vec::new(), 0);
    for f in tools {
        let text = std::fs::read_to_string(&f).unwrap();
        let impls: Vec<&str> = text.split("impl Capability for ").skip(1).collect();
        for body in impls {
            let ty = body.split_whitespace().next().unwrap_or_default();
            if ty.starts_with('$') {
                // The graph toolset's macro: its types are registered one by one below.
                assert!(body.contains("const SPEC: CapabilitySpec"), "{}: the macro states a policy", f.display());
                continue;
            }
            if !body.contains("const SPEC: CapabilitySpec") {
                missing.push(format!("{ty}: no policy (const SPEC) beside its handler"));
            }
            if !typed.contains(&format!("::{ty},")) {
                missing.push(format!("{ty} not in for_each_capability!"));
            }
            checked += 1;
        }
    }
    let mut adk = Vec::new();
    rust_files(&root.join("shared/adk/src"), &mut adk);
    for f in adk {
        let text = std::fs::read_to_string(&f).unwrap();
        assert!(!text.contains("[CapabilitySpec]"), "{}: a table of policies; each capability states its own", f.display());
    }
    assert!(checked >= 30, "the walk found the capabilities: {checked}");
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}

/// The fortress is its own trust domain (#37): only the mirror path writes it — the
/// dual-write in `ports::fortress`, and a promotion's backfill and reconcile through
/// `Backend::fortress_writer`. No other code of the product names the writer (the
/// backends' wiring hands it over; tests may build backends with it).
#[test]
fn only_the_mirror_path_writes_the_fortress() {
    let root = root();
    let mut files = Vec::new();
    for dir in ["shared", "functions"] {
        rust_files(&root.join(dir), &mut files);
    }
    let allowed = [
        "shared/ports/src/lib.rs",
        "shared/ports/src/fortress.rs",
        "shared/services/src/admin/promotion.rs",
        "shared/store-embedded/src/lib.rs",
        "shared/store-aws/src/lib.rs",
    ];
    let mut users = Vec::new();
    for f in files {
        let rel = f.strip_prefix(&root).unwrap().to_string_lossy().replace('\\', "/");
        if rel.contains("/tests/") || rel.contains("/benches/") {
            continue;
        }
        if std::fs::read_to_string(&f).unwrap().contains("fortress_writer") && !allowed.contains(&rel.as_str()) {
            users.push(rel);
        }
    }
    assert!(users.is_empty(), "only the promotion may take the fortress's writable store: {users:?}");
}

/// The code `continuity` is built from names a platform's own API (`std::os::unix`,
/// `tokio::signal::unix`, `std::os::windows`) only under a `#[cfg]` for that platform, at
/// most three lines above the use, so the release workflow's Windows and macOS builds
/// compile what this Linux machine cannot (docs/install.md). Owner-only files go through
/// `store_embedded::private`.
#[test]
fn platform_specific_calls_are_gated_by_their_platform() {
    let root = root();
    let mut files = Vec::new();
    rust_files(&root.join("functions/local/src"), &mut files);
    for entry in std::fs::read_dir(root.join("shared")).unwrap().flatten() {
        if entry.path().join("src").is_dir() {
            rust_files(&entry.path().join("src"), &mut files);
        }
    }
    assert!(files.len() > 100, "the walk found the sources: {}", files.len());
    let mut ungated = Vec::new();
    let mut gated = 0;
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let code = line.split("//").next().unwrap_or_default();
            let platform = if code.contains("os::unix") || code.contains("signal::unix") {
                "unix"
            } else if code.contains("os::windows") {
                "windows"
            } else {
                continue;
            };
            let ok = lines[i.saturating_sub(3)..=i].iter().any(|l| {
                let l = l.trim();
                l.starts_with("#[cfg") && l.contains(platform) && !l.contains(&format!("not({platform})"))
            });
            if ok {
                gated += 1;
            } else {
                ungated.push(format!("{}:{}: {}", f.strip_prefix(&root).unwrap().display(), i + 1, line.trim()));
            }
        }
    }
    assert!(ungated.is_empty(), "platform API outside a #[cfg] for its platform:\n{}", ungated.join("\n"));
    assert!(gated >= 5, "the check saw the gated uses: {gated}");
}
