//! `continuity gate set|verify|list|install-hook` (issue #18): gates on the home (as its
//! operator), or on any Continuity — `serve` or a deployed stack — through its gate API
//! with `--url` and an API key (`--key-file`, else `CONTINUITY_KEY`).
//!
//! `gate verify` is for scripts: exit status 0 authorized, 1 blocked or pending, 2 unknown
//! gate or any error (so `continuity gate verify --namespace repo:x --action push || exit`
//! refuses on anything but a clear yes). `install-hook` writes a git `pre-push` hook that
//! verifies (and spends) the push gate of the repository and logs each outcome.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, anyhow};
use clap::{Args, Subcommand};
use domain::TenantId;
use domain::gate::{Gate, GateStatus};
use services::gates::{Check, GateSet, Verdict};

use super::{ExitStatus, domain_err};
use crate::home;

#[derive(Args, Clone)]
pub(crate) struct Target {
    /// The tenant (on the home; with `--url`, the key's tenant is used).
    #[arg(long, default_value = "local")]
    tenant: TenantId,
    /// A Continuity's base URL (`http://127.0.0.1:8787`, a stack's API URL): use its gate
    /// API instead of opening the home.
    #[arg(long, env = "CONTINUITY_URL")]
    url: Option<String>,
    /// A file holding the API key for `--url` (else `CONTINUITY_KEY`).
    #[arg(long)]
    key_file: Option<PathBuf>,
}

#[derive(Subcommand)]
pub(crate) enum GateCommand {
    /// Authorize, block or reset a gate (a person's decision: on the home as its
    /// operator; with `--url`, the key needs `approvals:decide`).
    Set {
        #[command(flatten)]
        target: Target,
        /// Where the action happens, e.g. `repo:acme/web`, `env:prod`.
        #[arg(long)]
        namespace: String,
        /// The action, e.g. `push`, `deploy`.
        #[arg(long)]
        action: String,
        /// `authorized`, `blocked` or `pending`.
        #[arg(long)]
        status: GateStatus,
        #[arg(long)]
        reason: Option<String>,
        /// Seconds the status lasts (an authorization then no longer holds).
        #[arg(long)]
        expires_in: Option<u64>,
        /// The first verify that finds the authorization spends it.
        #[arg(long)]
        once: bool,
    },
    /// Verify a gate: exit 0 authorized, 1 blocked or pending, 2 unknown or error.
    Verify {
        #[command(flatten)]
        target: Target,
        #[arg(long)]
        namespace: String,
        #[arg(long)]
        action: String,
        /// Spend the authorization (the next verify is refused until a person authorizes again).
        #[arg(long)]
        consume: bool,
        /// Print nothing (the exit status says it all).
        #[arg(long, short)]
        quiet: bool,
    },
    /// List gates (optionally of one status).
    List {
        #[command(flatten)]
        target: Target,
        #[arg(long)]
        status: Option<GateStatus>,
    },
    /// Install a git `pre-push` hook in a repository that verifies (and spends) its push
    /// gate before every push, and appends each outcome to `.git/continuity-gate.log`.
    InstallHook {
        #[command(flatten)]
        target: Target,
        /// The repository (default: the current directory's).
        #[arg(long, default_value = ".")]
        repo: PathBuf,
        /// The gate's namespace (default: `repo:` and the repository folder's name).
        #[arg(long)]
        namespace: Option<String>,
        /// The action verified (default `push`).
        #[arg(long, default_value = "push")]
        action: String,
        /// Replace a `pre-push` hook that is not ours (it is kept as `pre-push.before-continuity`).
        #[arg(long)]
        force: bool,
        /// Take the hook out again (restoring the one it replaced).
        #[arg(long)]
        remove: bool,
    },
}

/// The marker line of our hook.
const HOOK_MARK: &str = "# continuity gate hook";

/// Runs a gate command: through `--url`, else on `stack` (a deployed stack's services,
/// `--backend aws`), else on the home.
pub(crate) async fn run(
    home_flag: Option<PathBuf>,
    stack: Option<services::Services>,
    command: GateCommand,
) -> anyhow::Result<()> {
    let local = |flag: Option<PathBuf>| {
        let stack = stack.clone();
        async move {
            match stack {
                Some(s) => Ok(s),
                None => open_home(flag).await,
            }
        }
    };
    match command {
        GateCommand::InstallHook { target, repo, namespace, action, force, remove } => {
            if stack.is_some() && target.url.is_none() {
                return Err(anyhow!("the hook verifies through the gate API: pass --url (the stack's API URL) and --key-file"));
            }
            install_hook(home_flag, &target, &repo, namespace, &action, force, remove)
        }
        GateCommand::Set { target, namespace, action, status, reason, expires_in, once } => {
            let set = GateSet { namespace, action, status, reason, expires_in, consume_once: once };
            let gate = match Remote::of(&target)? {
                Some(r) => r.set(&set).await?,
                None => {
                    let s = local(home_flag).await?;
                    let operator = s.admin.operator(&target.tenant).await.map_err(domain_err)?;
                    s.gates.set(&operator, set).await.map_err(domain_err)?
                }
            };
            println!("{}", describe(&gate));
            Ok(())
        }
        GateCommand::Verify { target, namespace, action, consume, quiet } => {
            let check = match Remote::of(&target)? {
                Some(r) => r.verify(&namespace, &action, consume).await?,
                None => {
                    let s = local(home_flag).await?;
                    let operator = s.admin.operator(&target.tenant).await.map_err(domain_err)?;
                    s.gates.verify(&operator, &namespace, &action, consume).await.map_err(domain_err)?
                }
            };
            let line = format!(
                "gate {action} in {namespace}: {}{} — {}",
                check.verdict.as_str(),
                if check.consumed { " (spent)" } else { "" },
                check.reason
            );
            let code = match check.verdict {
                Verdict::Authorized => 0,
                Verdict::Blocked | Verdict::Pending => 1,
                Verdict::Unknown => 2,
            };
            if !quiet {
                if code == 0 {
                    println!("{line}");
                } else {
                    eprintln!("{line}");
                }
            }
            if code == 0 { Ok(()) } else { Err(ExitStatus { code, message: None }.into()) }
        }
        GateCommand::List { target, status } => {
            let gates = match Remote::of(&target)? {
                Some(r) => r.list(status).await?,
                None => {
                    let s = local(home_flag).await?;
                    let operator = s.admin.operator(&target.tenant).await.map_err(domain_err)?;
                    let mut all = Vec::new();
                    let mut page = domain::PageRequest::first(500);
                    loop {
                        let p = s.gates.list(&operator, status, &page).await.map_err(domain_err)?;
                        all.extend(p.items);
                        match p.next_cursor {
                            Some(c) => page = domain::PageRequest::after(500, c),
                            None => break,
                        }
                    }
                    all
                }
            };
            if gates.is_empty() {
                eprintln!("no gates");
            }
            for g in &gates {
                println!("{}", describe(g));
            }
            Ok(())
        }
    }
}

fn describe(g: &Gate) -> String {
    let mut s = format!("{}\t{}\t{}\tset by {}", g.namespace, g.action, g.status.as_str(), g.set_by);
    if let Some(e) = g.expires_at {
        s.push_str(&format!("\tuntil {}", e.to_rfc3339()));
    }
    if g.consume_once {
        s.push_str("\tonce");
    }
    if let Some(r) = &g.reason {
        s.push_str(&format!("\t{r}"));
    }
    s
}

/// The home, which must exist already (a gate command never creates an empty one).
async fn open_home(flag: Option<PathBuf>) -> anyhow::Result<services::Services> {
    let path = home::resolve(flag);
    if !home::exists(&path) {
        return Err(anyhow!(
            "no Continuity home at {} (start `continuity serve` once, or pass --home, or --url for a running server)",
            path.display()
        ));
    }
    // Gates need no search: the lexical embedder avoids loading a sentence model.
    Ok(home::open(path, "hashing").await?.services)
}

/// A Continuity's gate API.
struct Remote {
    base: String,
    key: String,
    http: reqwest::Client,
}

impl Remote {
    fn of(t: &Target) -> anyhow::Result<Option<Self>> {
        let Some(url) = &t.url else { return Ok(None) };
        let key = match &t.key_file {
            Some(p) => std::fs::read_to_string(p).with_context(|| format!("reading the key file {}", p.display()))?,
            None => std::env::var("CONTINUITY_KEY")
                .map_err(|_| anyhow!("--url needs an API key: --key-file FILE or CONTINUITY_KEY"))?,
        };
        let http = reqwest::Client::builder()
            .use_preconfigured_tls(tls::client_config())
            .timeout(std::time::Duration::from_secs(20))
            .build()
            .map_err(|e| anyhow!("starting the HTTP client: {e}"))?;
        Ok(Some(Self { base: url.trim_end_matches('/').to_owned(), key: key.trim().to_owned(), http }))
    }

    async fn send(&self, req: reqwest::RequestBuilder) -> anyhow::Result<(u16, serde_json::Value)> {
        let resp = req.bearer_auth(&self.key).send().await.map_err(|e| anyhow!("calling {}: {e}", self.base))?;
        let status = resp.status().as_u16();
        let body: serde_json::Value = resp.json().await.unwrap_or(serde_json::Value::Null);
        Ok((status, body))
    }

    fn failure(status: u16, body: &serde_json::Value) -> anyhow::Error {
        let message = body.pointer("/error/message").and_then(|m| m.as_str()).unwrap_or("no error message");
        let code = body.pointer("/error/code").and_then(|m| m.as_str()).unwrap_or("?");
        anyhow!("the server answered {status} {code}: {message}")
    }

    fn gate(body: &serde_json::Value) -> anyhow::Result<Gate> {
        serde_json::from_value(body.get("gate").cloned().unwrap_or_default()).map_err(|e| anyhow!("unexpected answer: {e}"))
    }

    async fn set(&self, set: &GateSet) -> anyhow::Result<Gate> {
        let body = serde_json::json!({
            "namespace": set.namespace, "action": set.action, "status": set.status.as_str(),
            "reason": set.reason, "expires_in": set.expires_in, "consume_once": set.consume_once,
        });
        let (status, answer) = self.send(self.http.post(format!("{}/v1/gates", self.base)).json(&body)).await?;
        if status != 200 {
            return Err(Self::failure(status, &answer));
        }
        Self::gate(&answer)
    }

    async fn verify(&self, namespace: &str, action: &str, consume: bool) -> anyhow::Result<Check> {
        let req = self.http.get(format!("{}/v1/gates/verify", self.base)).query(&[
            ("namespace", namespace),
            ("action", action),
            ("consume", if consume { "true" } else { "false" }),
        ]);
        let (status, answer) = self.send(req).await?;
        let verdict = match (status, answer.get("verdict").and_then(|v| v.as_str())) {
            (200, Some("authorized")) => Verdict::Authorized,
            (403, Some("blocked")) => Verdict::Blocked,
            (403, Some("pending")) => Verdict::Pending,
            (404, Some("unknown")) => Verdict::Unknown,
            _ => return Err(Self::failure(status, &answer)),
        };
        Ok(Check {
            verdict,
            reason: answer.get("reason").and_then(|r| r.as_str()).unwrap_or_default().to_owned(),
            consumed: answer.get("consumed").and_then(serde_json::Value::as_bool).unwrap_or(false),
            gate: Self::gate(&answer).ok(),
        })
    }

    async fn list(&self, status: Option<GateStatus>) -> anyhow::Result<Vec<Gate>> {
        let mut all = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let mut q: Vec<(&str, String)> = Vec::new();
            if let Some(s) = status {
                q.push(("status", s.as_str().to_owned()));
            }
            if let Some(c) = &cursor {
                q.push(("cursor", c.clone()));
            }
            let (code, answer) = self.send(self.http.get(format!("{}/v1/gates", self.base)).query(&q)).await?;
            if code != 200 {
                return Err(Self::failure(code, &answer));
            }
            let gates: Vec<Gate> = serde_json::from_value(answer.get("gates").cloned().unwrap_or_default())
                .map_err(|e| anyhow!("unexpected answer: {e}"))?;
            all.extend(gates);
            cursor = answer.get("next_cursor").and_then(|c| c.as_str()).map(str::to_owned);
            if cursor.is_none() {
                return Ok(all);
            }
        }
    }
}

/// Single-quotes `s` for a POSIX shell.
fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The repository's hooks folder (`core.hooksPath` when set, else `.git/hooks`).
fn hooks_dir(repo: &Path) -> anyhow::Result<PathBuf> {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .arg("-C")
            .arg(repo)
            .args(args)
            .output()
            .map_err(|e| anyhow!("running git: {e}"))
            .and_then(|o| {
                if o.status.success() {
                    Ok(String::from_utf8_lossy(&o.stdout).trim().to_owned())
                } else {
                    Err(anyhow!("{} is not a git repository: {}", repo.display(), String::from_utf8_lossy(&o.stderr).trim()))
                }
            })
    };
    let path = git(&["rev-parse", "--git-path", "hooks"])?;
    let p = PathBuf::from(path);
    Ok(if p.is_absolute() { p } else { repo.join(p) })
}

#[allow(clippy::fn_params_excessive_bools)]
fn install_hook(
    home_flag: Option<PathBuf>,
    target: &Target,
    repo: &Path,
    namespace: Option<String>,
    action: &str,
    force: bool,
    remove: bool,
) -> anyhow::Result<()> {
    let hooks = hooks_dir(repo)?;
    let hook = hooks.join("pre-push");
    let aside = hooks.join("pre-push.before-continuity");
    let ours = std::fs::read_to_string(&hook).is_ok_and(|s| s.contains(HOOK_MARK));
    if remove {
        if !ours {
            return Err(anyhow!("{} is not a Continuity hook; nothing removed", hook.display()));
        }
        std::fs::remove_file(&hook).with_context(|| format!("removing {}", hook.display()))?;
        if aside.exists() {
            std::fs::rename(&aside, &hook).with_context(|| format!("restoring {}", aside.display()))?;
            println!("removed the gate hook; restored the previous pre-push hook");
        } else {
            println!("removed the gate hook from {}", hook.display());
        }
        return Ok(());
    }
    let repo_abs = repo.canonicalize().with_context(|| format!("resolving {}", repo.display()))?;
    let namespace = match namespace {
        Some(n) => n,
        None => {
            let name = repo_abs.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "repo".into());
            let clean: String =
                name.chars().map(|c| if c.is_ascii_alphanumeric() || "._-".contains(c) { c } else { '-' }).collect();
            format!("repo:{clean}")
        }
    };
    domain::gate::check_gate_name("namespace", &namespace).map_err(domain_err)?;
    domain::gate::check_gate_name("action", action).map_err(domain_err)?;
    if hook.exists() && !ours {
        if !force {
            return Err(anyhow!(
                "{} exists and is not ours: add --force to keep it aside as {} and install the gate hook",
                hook.display(),
                aside.display()
            ));
        }
        std::fs::rename(&hook, &aside).with_context(|| format!("keeping {} aside", hook.display()))?;
    }
    let exe = std::env::current_exe().context("locating this continuity binary")?;
    let mut args = vec![sh_quote(&exe.to_string_lossy())];
    match &target.url {
        Some(url) => {
            args.extend(["gate".into(), "verify".into(), "--url".into(), sh_quote(url)]);
            if let Some(k) = &target.key_file {
                let k = k.canonicalize().with_context(|| format!("resolving {}", k.display()))?;
                args.extend(["--key-file".into(), sh_quote(&k.to_string_lossy())]);
            }
        }
        None => {
            let home = home::resolve(home_flag);
            let home = home.canonicalize().unwrap_or(home);
            args.extend(["--home".into(), sh_quote(&home.to_string_lossy())]);
            args.extend(["gate".into(), "verify".into(), "--tenant".into(), sh_quote(target.tenant.as_str())]);
        }
    }
    args.extend(["--namespace".into(), sh_quote(&namespace), "--action".into(), sh_quote(action), "--consume".into()]);
    let script = format!(
        "#!/bin/sh\n{HOOK_MARK} (installed by `continuity gate install-hook`; remove with --remove)\n\
         # Verifies and spends the gate {action} in {namespace} before every push: exit 0 lets the push go,\n\
         # anything else stops it. Each outcome is appended to continuity-gate.log in the git folder.\n\
         log=\"$(git rev-parse --git-dir)/continuity-gate.log\"\n\
         prev=\"$(dirname \"$0\")/pre-push.before-continuity\"\n\
         # The hook this one replaced runs first, so a failing check does not spend the gate.\n\
         if [ -x \"$prev\" ]; then \"$prev\" \"$@\" || exit $?; fi\n\
         out=$({cmd} 2>&1)\n\
         status=$?\n\
         printf '%s\\t%s\\t%s\\n' \"$(date -u +%Y-%m-%dT%H:%M:%SZ)\" \"$status\" \"$out\" >> \"$log\"\n\
         printf '%s\\n' \"$out\" >&2\n\
         if [ $status -ne 0 ]; then\n\
         \x20 echo \"continuity: push refused — ask a person to authorize {action} in {namespace} (approvals console, or continuity gate set)\" >&2\n\
         fi\n\
         exit $status\n",
        cmd = args.join(" "),
    );
    std::fs::create_dir_all(&hooks).with_context(|| format!("creating {}", hooks.display()))?;
    std::fs::write(&hook, script).with_context(|| format!("writing {}", hook.display()))?;
    store_embedded::private::set_mode(&hook, 0o755).with_context(|| format!("making {} executable", hook.display()))?;
    println!("installed {}: pushes need the gate {action} in {namespace}", hook.display());
    Ok(())
}
