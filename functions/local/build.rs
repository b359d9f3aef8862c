//! Names the commit the binary is built from in `continuity --version`:
//! `CONTINUITY_COMMIT` when set (a container or archive build without `.git`), else
//! `git rev-parse --short=12 HEAD`, else `unknown`.

use std::path::Path;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=CONTINUITY_COMMIT");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let git = root.join(".git");
    println!("cargo:rerun-if-changed=build.rs");
    // A new commit moves HEAD or the branch it names (or packs the refs). Only files that
    // exist are watched: a missing one would rerun this on every build (a source tree
    // without .git, e.g. a container build).
    let mut watched = vec![git.join("HEAD"), git.join("packed-refs")];
    if let Ok(head) = std::fs::read_to_string(git.join("HEAD"))
        && let Some(branch) = head.trim().strip_prefix("ref: ")
    {
        watched.push(git.join(branch));
    }
    for f in watched.iter().filter(|f| f.is_file()) {
        println!("cargo:rerun-if-changed={}", f.display());
    }
    let commit = std::env::var("CONTINUITY_COMMIT").ok().filter(|c| !c.trim().is_empty()).or_else(|| {
        let out = Command::new("git").arg("-C").arg(&root).args(["rev-parse", "--short=12", "HEAD"]).output().ok()?;
        out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned()).filter(|c| !c.is_empty())
    });
    println!("cargo:rustc-env=CONTINUITY_COMMIT={}", commit.as_deref().unwrap_or("unknown"));
}
