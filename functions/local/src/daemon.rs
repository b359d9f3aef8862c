//! The `continuity serve` that owns a home: it announces itself in `serve.json` (its pid
//! and URL) while it runs, and `continuity stdio` with a key attaches to it through the
//! bridge instead of opening the database a second time — one search index and one
//! change feed for every client. `--spawn` starts one in the background when none runs.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context as _, anyhow};
use serde::{Deserialize, Serialize};

pub const DAEMON_FILE: &str = "serve.json";

#[derive(Debug, Serialize, Deserialize)]
struct Announcement {
    pid: u32,
    url: String,
}

/// Says this process serves `home` at `url` (best effort: a home that cannot take the
/// file is still served).
pub fn announce(home: &Path, url: &str) {
    let a = Announcement { pid: std::process::id(), url: url.to_owned() };
    let path = home.join(DAEMON_FILE);
    let write = || -> anyhow::Result<()> {
        use std::io::Write as _;
        let mut f = store_embedded::private::file_options().write(true).create(true).truncate(true).open(&path)?;
        f.write_all(serde_json::to_string(&a)?.as_bytes())?;
        Ok(())
    };
    if let Err(e) = write() {
        tracing::warn!(error = %e, "could not write serve.json: stdio sessions will open the home themselves");
    }
}

/// Takes the announcement down when it is this process's.
pub fn retire(home: &Path) {
    let path = home.join(DAEMON_FILE);
    let ours = std::fs::read_to_string(&path)
        .ok()
        .and_then(|t| serde_json::from_str::<Announcement>(&t).ok())
        .is_some_and(|a| a.pid == std::process::id());
    if ours {
        let _ = std::fs::remove_file(&path);
    }
}

/// The base URL of the `serve` announced in `home`, when it answers.
pub async fn running(home: &Path) -> Option<String> {
    let text = std::fs::read_to_string(home.join(DAEMON_FILE)).ok()?;
    let a: Announcement = serde_json::from_str(&text).ok()?;
    // The announcing process must still be a `continuity serve` (where /proc tells): a
    // port another program took over since would otherwise receive the key.
    let proc = Path::new("/proc");
    if proc.is_dir() {
        let cmdline = std::fs::read(proc.join(a.pid.to_string()).join("cmdline")).ok()?;
        let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
        if !args.iter().any(|a| *a == b"serve") {
            return None;
        }
    }
    let http =
        reqwest::Client::builder().use_preconfigured_tls(tls::client_config()).timeout(Duration::from_secs(2)).build().ok()?;
    // Any answer means it runs (a degraded store answers 503 and still serves reads).
    http.get(format!("{}/healthz", a.url)).send().await.ok()?;
    Some(a.url)
}

/// The MCP URL to attach to: the running `serve` of `home`, else (with `spawn`) one
/// started now; `None` when none runs and none should be started.
///
/// # Errors
/// When a spawned server does not come up (its log is named).
pub async fn attach(home: &Path, embedder: &str, spawn: bool) -> anyhow::Result<Option<String>> {
    if let Some(url) = running(home).await {
        tracing::info!(url, "attaching to the running serve of this home");
        return Ok(Some(format!("{url}/mcp")));
    }
    if !spawn {
        return Ok(None);
    }
    crate::home::create_folder(home)?;
    let log = home.join("serve.log");
    let addr = if std::net::TcpListener::bind("127.0.0.1:8787").is_ok() { "127.0.0.1:8787" } else { "127.0.0.1:0" };
    let exe = std::env::current_exe().context("finding this program")?;
    let out =
        std::fs::OpenOptions::new().create(true).append(true).open(&log).with_context(|| format!("opening {}", log.display()))?;
    let mut command = std::process::Command::new(exe);
    command
        .arg("--home")
        .arg(home)
        .args(["--embedder", embedder, "serve", "--addr", addr])
        .stdin(std::process::Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out);
    detach(&mut command);
    let mut child = command.spawn().context("starting continuity serve")?;
    eprintln!("started continuity serve for {} (pid {}, log {})", home.display(), child.id(), log.display());
    for _ in 0..300 {
        if let Some(url) = running(home).await {
            return Ok(Some(format!("{url}/mcp")));
        }
        if let Ok(Some(status)) = child.try_wait() {
            return Err(anyhow!("continuity serve stopped at once ({status}); see {}", log.display()));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Err(anyhow!("continuity serve did not answer within a minute; see {}", log.display()))
}

/// Starts the server in a process group of its own: the client stopping this session
/// (and the group it started) leaves the server running.
#[cfg(unix)]
fn detach(command: &mut std::process::Command) {
    use std::os::unix::process::CommandExt as _;
    command.process_group(0);
}

/// Starts the server in a process group of its own, without a console: the client
/// closing this session's console leaves the server running.
#[cfg(windows)]
fn detach(command: &mut std::process::Command) {
    use std::os::windows::process::CommandExt as _;
    /// `CREATE_NEW_PROCESS_GROUP | DETACHED_PROCESS` (Win32 process creation flags).
    const FLAGS: u32 = 0x0000_0200 | 0x0000_0008;
    command.creation_flags(FLAGS);
}
