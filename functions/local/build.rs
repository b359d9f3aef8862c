//! Names the commit the binary is built from in `continuity --version`:
//! `CONTINUITY_COMMIT` when set (a container or archive build without `.git`), else
//! `git rev-parse --short=12 HEAD`, else `unknown`.

use std::path::Path;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=CONTINUITY_COMMIT");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let git = root.join(".git");
    // A new commit moves HEAD or the branch it names (or packs the refs).
    for f in ["HEAD", "packed-refs"] {
        println!("cargo:rerun-if-changed={}", git.join(f).display());
    }
    if let Ok(head) = std::fs::read_to_string(git.join("HEAD"))
        && let Some(branch) = head.trim().strip_prefix("ref: ")
    {
        println!("cargo:rerun-if-changed={}", git.join(branch).display());
    }
    let commit = std::env::var("CONTINUITY_COMMIT").ok().filter(|c| !c.trim().is_empty()).or_else(|| {
        let out = Command::new("git").arg("-C").arg(&root).args(["rev-parse", "--short=12", "HEAD"]).output().ok()?;
        out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned()).filter(|c| !c.is_empty())
    });
    println!("cargo:rustc-env=CONTINUITY_COMMIT={}", commit.as_deref().unwrap_or("unknown"));
}
