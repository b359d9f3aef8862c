//! The layering the architecture promises, checked on the source itself (ARCHITECTURE.md):
//! edges — the HTTP gateway, the MCP surface, the Lambda functions and the CLI — call use
//! cases and never reach past them into the backend; each crate's `//!` map names every
//! module it declares, so the maps cannot drift from the code.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    let dir = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").to_owned());
    Path::new(&dir).join("..")
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
