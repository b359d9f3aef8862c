//! The home folder: database, blobs and the owner key file, created on first use, and
//! its recorded format ([`format`]: a newer home refused, an older one upgraded).

pub mod format;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use ports::SystemClock;
use services::Services;

pub const OWNER_KEY_FILE: &str = "owner.key";

pub struct Home {
    pub path: PathBuf,
    pub services: Services,
    /// Set when this open created the `local` tenant and its owner key.
    pub created_key: bool,
}

impl Home {
    pub fn key_path(&self) -> PathBuf {
        self.path.join(OWNER_KEY_FILE)
    }
}

/// Creates the home folder (and its parents) readable by its owner alone.
///
/// # Errors
/// When it cannot be created.
pub fn create_folder(path: &Path) -> anyhow::Result<()> {
    store_embedded::private::create_dir_all(path).with_context(|| format!("creating the home folder {}", path.display()))
}

/// Whether `path` holds a home already (its database exists).
pub fn exists(path: &Path) -> bool {
    path.join(store_embedded::DATABASE_FILE).exists()
}

/// Resolves `--home`, `$CONTINUITY_HOME`, or `./.continuity`. A leading `~`, `$HOME` or
/// `${HOME}` is the user's home folder (`$HOME`, else `%USERPROFILE%` on Windows):
/// clients that start `continuity` without a shell (Claude Desktop's bundles) pass them
/// through unexpanded.
pub fn resolve(flag: Option<PathBuf>) -> PathBuf {
    let path =
        flag.or_else(|| std::env::var_os("CONTINUITY_HOME").map(PathBuf::from)).unwrap_or_else(|| PathBuf::from(".continuity"));
    expand_home(path, std::env::var_os("HOME").or_else(|| std::env::var_os("USERPROFILE")).map(PathBuf::from))
}

fn expand_home(path: PathBuf, user_home: Option<PathBuf>) -> PathBuf {
    let Some(user_home) = user_home else { return path };
    let Some(text) = path.to_str() else { return path };
    for prefix in ["${HOME}", "$HOME", "~"] {
        if let Some(rest) = text.strip_prefix(prefix)
            && (rest.is_empty() || rest.starts_with(['/', '\\']))
        {
            return user_home.join(rest.trim_start_matches(['/', '\\']));
        }
    }
    path
}

fn write_secret_file(path: &Path, contents: &str) -> anyhow::Result<()> {
    use std::io::Write as _;
    let mut f = store_embedded::private::file_options()
        .write(true)
        .create_new(true)
        .open(path)
        .with_context(|| format!("creating {}", path.display()))?;
    f.write_all(contents.as_bytes())?;
    f.write_all(b"\n")?;
    f.sync_all()?;
    Ok(())
}

/// The embedder named on the command line: `auto` (the model installed in `home` by
/// `continuity model install`, else hashing), `hashing` or `local:DIR`.
pub fn embedder(spec: &str, home: &Path) -> anyhow::Result<Arc<dyn ports::Embedder>> {
    if spec == "auto" {
        return match crate::cli::model::installed(home) {
            Some(dir) => embedder(&format!("local:{}", dir.display()), home),
            None => embedder("hashing", home),
        };
    }
    if spec == "hashing" {
        return Ok(Arc::new(ports::search::HashingEmbedder::new(384)));
    }
    let Some(dir) = spec.strip_prefix("local:") else {
        anyhow::bail!("unknown embedder {spec:?}: expected auto, hashing or local:DIR");
    };
    let model = embed::SentenceModel::load(Path::new(dir)).map_err(|e| anyhow::anyhow!("{}", e.message))?;
    model.set_token_states(late_interaction(std::env::var("CONTINUITY_LATE_INTERACTION").ok().as_deref())?);
    model.set_token_cache(token_cache_bytes(std::env::var("CONTINUITY_TOKEN_CACHE_MB").ok().as_deref())?);
    // Late interaction's token states outlive a restart in the home (a cache: without
    // it they are kept in memory only).
    let max_bytes = mib(
        "CONTINUITY_TOKEN_STATES_MB",
        std::env::var("CONTINUITY_TOKEN_STATES_MB").ok().as_deref(),
        embed::DEFAULT_DISK_BYTES,
    )?;
    if max_bytes == 0 {
        // None kept on disk: the file is not opened (what it holds stays until deleted).
        return Ok(Arc::new(model));
    }
    let states = home.join(TOKEN_STATES);
    // Created open to its owner alone (SQLite gives its journal the same mode).
    let _ = store_embedded::private::file_options().write(true).create(true).truncate(false).open(&states);
    if let Err(e) = model.keep_states_in(&states, max_bytes) {
        tracing::warn!(error = %e.message, "token states are kept in memory only");
    }
    Ok(Arc::new(model))
}

/// The file in the home where late interaction's token states are kept (vectors of what
/// was written, keyed by a hash of the text; deleted with what they are of).
pub const TOKEN_STATES: &str = "token-states.sqlite";

/// Most memory late interaction keeps written texts' token states in
/// (`CONTINUITY_TOKEN_CACHE_MB`, in MiB: 256 by default, about 32 000 short memories;
/// with 0 none are kept and every search runs the model over its candidates, about
/// 100 ms on 2 cores).
///
/// # Errors
/// Anything but a whole number of MiB up to 1 TiB.
pub fn token_cache_bytes(value: Option<&str>) -> anyhow::Result<usize> {
    let bytes = mib("CONTINUITY_TOKEN_CACHE_MB", value, embed::DEFAULT_CACHE_BYTES as u64)?;
    usize::try_from(bytes).map_err(|_| anyhow::anyhow!("CONTINUITY_TOKEN_CACHE_MB: more than this machine can address"))
}

/// A size in MiB from the variable `name` (its `value`), `default` bytes when unset:
/// the bound of the token states' file is `CONTINUITY_TOKEN_STATES_MB` (2048 by
/// default, about 230 000 short memories' states; the oldest written go first past it).
///
/// # Errors
/// Anything but a whole number of MiB up to 1 TiB.
pub fn mib(name: &str, value: Option<&str>, default: u64) -> anyhow::Result<u64> {
    match value.map(str::trim) {
        None | Some("") => Ok(default),
        Some(mb) => match mb.parse::<u64>() {
            Ok(mb) if mb <= 1 << 20 => Ok(mb << 20),
            _ => anyhow::bail!("{name}={mb:?}: expected a whole number of MiB (0 to 1048576)"),
        },
    }
}

/// Whether searches order their best candidates again by late interaction with the
/// sentence model (`CONTINUITY_LATE_INTERACTION`: `on`, the default, or `off` — searches
/// about ten times faster on 2 cores, with the fused order's lower recall).
///
/// # Errors
/// Any other value.
pub fn late_interaction(value: Option<&str>) -> anyhow::Result<bool> {
    match value.map(str::trim) {
        None | Some("" | "on") => Ok(true),
        Some("off") => Ok(false),
        Some(other) => anyhow::bail!("CONTINUITY_LATE_INTERACTION={other:?}: expected on or off"),
    }
}

/// A home made by a command other than `serve` (`init`, `setup`) before it indexed
/// anything: its first `serve` still fetches the sentence model.
pub const MODEL_PENDING: &str = "model.pending";

/// Marks a new home for the model fetch of its first `serve` (best effort).
pub fn mark_model_pending(path: &Path) {
    let _ = std::fs::write(path.join(MODEL_PENDING), b"the first `continuity serve` fetches the sentence model\n");
}

/// Opens the home that must already exist: only `serve`, `stdio`, `setup` and `init`
/// create one, so a command run from another folder never makes a second home with its
/// own owner key.
///
/// # Errors
/// When there is no home at `path` (said with where it looked and how to point at one).
pub async fn open_existing(path: PathBuf, embedder_spec: &str) -> anyhow::Result<Home> {
    if !exists(&path) {
        let shown = std::path::absolute(&path).unwrap_or_else(|_| path.clone());
        anyhow::bail!(
            "no Continuity home at {} (the home is --home DIR, else $CONTINUITY_HOME, else ./.continuity). \
             Point at yours with --home DIR or CONTINUITY_HOME=DIR, or create one with `continuity init` (or `continuity serve`)",
            shown.display()
        );
    }
    open(path, embedder_spec).await
}

/// Opens the home, creating it, the `local` tenant and the owner key on first use.
///
/// # Errors
/// A home whose database lost its data beside its owner key is refused (see [`rebuild`]).
pub async fn open(path: PathBuf, embedder_spec: &str) -> anyhow::Result<Home> {
    open_with(path, embedder_spec, false).await
}

/// [`open`] for `continuity restore`, which rebuilds a home whose database was lost: a
/// new database beside the old owner key is expected (the old key is moved aside).
pub async fn rebuild(path: PathBuf, embedder_spec: &str) -> anyhow::Result<Home> {
    open_with(path, embedder_spec, true).await
}

async fn open_with(path: PathBuf, embedder_spec: &str, rebuild: bool) -> anyhow::Result<Home> {
    create_folder(&path)?;
    let path = path.canonicalize().with_context(|| format!("resolving {}", path.display()))?;
    let plan = format::prepare(&path)?;
    let backend = store_embedded::open_backend_with(&path, Arc::new(SystemClock), embedder(embedder_spec, &path)?)
        .map_err(|e| anyhow::anyhow!("opening the home {}: {}", path.display(), e.for_operator()))?;
    let services = Services::new(backend);
    // A database without the home's tenant beside an owner key is a home whose data went
    // missing (its `continuity.db-wal` deleted, a file replaced): never silently a new home.
    let key_path = path.join(OWNER_KEY_FILE);
    if key_path.exists() && !rebuild {
        let local = domain::TenantId::new("local").map_err(|e| anyhow::anyhow!("{}", e.message))?;
        if services.admin.show_tenant(&local).await.is_err_and(|e| e.code == domain::ErrorCode::NotFound) {
            anyhow::bail!(
                "the home {} has an owner key but its database holds no workspace: its data is missing (was {} or its \
                 write-ahead log {}-wal moved or deleted?). Put the files back, or rebuild it with `continuity restore --tenant \
                 local`; to start a new home here instead, move {} away first",
                path.display(),
                store_embedded::DATABASE_FILE,
                store_embedded::DATABASE_FILE,
                key_path.display()
            );
        }
    }
    let issued =
        services.admin.bootstrap_local().await.map_err(|e| anyhow::anyhow!("initialising the home: {}", e.for_operator()))?;
    let created_key = issued.is_some();
    if let Some(key) = issued {
        let key_path = path.join(OWNER_KEY_FILE);
        if key_path.exists() {
            // A new database beside an old key file (the database was lost or removed,
            // e.g. before `continuity restore`): the old key names a key record that no
            // longer exists, so it can never work again. Keep it aside, never overwrite.
            let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
            let aside = path.join(format!("{OWNER_KEY_FILE}.replaced-{secs}"));
            std::fs::rename(&key_path, &aside).with_context(|| format!("moving the old {}", key_path.display()))?;
            eprintln!(
                "warning: the home's database is new but {} existed; it was moved to {} and a new owner key written",
                key_path.display(),
                aside.display()
            );
        }
        write_secret_file(&key_path, &key.token)?;
    }
    format::finish(&path, &plan)?;
    Ok(Home { path, services, created_key })
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    #[test]
    fn late_interaction_is_on_unless_switched_off_and_a_typo_is_an_error() {
        for (value, on) in [(None, true), (Some(""), true), (Some("on"), true), (Some(" off "), false)] {
            assert_eq!(super::late_interaction(value).unwrap(), on, "{value:?}");
        }
        let e = super::late_interaction(Some("no")).unwrap_err().to_string();
        assert!(e.contains("CONTINUITY_LATE_INTERACTION") && e.contains("on or off"), "{e}");
    }

    #[test]
    fn the_token_cache_is_256_mib_unless_set_and_a_typo_is_an_error() {
        assert_eq!(super::token_cache_bytes(None).unwrap(), 256 << 20);
        assert_eq!(super::token_cache_bytes(Some(" 64 ")).unwrap(), 64 << 20);
        assert_eq!(super::token_cache_bytes(Some("0")).unwrap(), 0);
        assert_eq!(super::mib("X", None, embed::DEFAULT_DISK_BYTES).unwrap(), 2 << 30);
        assert_eq!(super::mib("X", Some("10"), 0).unwrap(), 10 << 20);
        assert!(
            super::mib("CONTINUITY_TOKEN_STATES_MB", Some("lots"), 0)
                .unwrap_err()
                .to_string()
                .contains("CONTINUITY_TOKEN_STATES_MB")
        );
        for bad in ["-1", "1.5", "lots", "2000000"] {
            let e = super::token_cache_bytes(Some(bad)).unwrap_err().to_string();
            assert!(e.contains("CONTINUITY_TOKEN_CACHE_MB") && e.contains("MiB"), "{e}");
        }
    }

    #[test]
    fn a_leading_tilde_or_home_variable_is_the_users_home_folder() {
        let home = Some(PathBuf::from("/home/ana"));
        for given in ["~/.continuity", "$HOME/.continuity", "${HOME}/.continuity", "~\\.continuity"] {
            assert_eq!(super::expand_home(PathBuf::from(given), home.clone()), PathBuf::from("/home/ana/.continuity"), "{given}");
        }
        assert_eq!(super::expand_home(PathBuf::from("~"), home.clone()), PathBuf::from("/home/ana"));
        for kept in ["~bob/x", "$HOMEDIR/x", "./~/x", "/srv/continuity"] {
            assert_eq!(super::expand_home(PathBuf::from(kept), home.clone()), PathBuf::from(kept), "{kept}");
        }
        assert_eq!(super::expand_home(PathBuf::from("~/x"), None), PathBuf::from("~/x"));
    }
}
