//! The home's format: `format.json` records the layout of the home folder, the schema of
//! its databases and the release that last opened it.
//!
//! Every command opens a home through [`prepare`] first:
//! - a home written by a newer release (a higher format or database schema) is refused,
//!   both versions named, and nothing in it is touched;
//! - an older home (a lower format or schema, or no `format.json`: a home made before
//!   releases recorded one) is copied to `upgrades/<from>-to-<to>-<time>/` (each
//!   database as a consistent snapshot), migrated when it opens, checked, and the new
//!   format recorded, said on stderr;
//! - a current one opens as it is.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use serde::{Deserialize, Serialize};

/// The file in the home.
pub const FILE: &str = "format.json";
/// The layout of the home folder this release writes. Raise it when the folder's layout
/// changes (a file moved, renamed or re-encoded), with the step that converts an older one.
pub const FORMAT: u32 = 1;
/// The folder of the copies taken before an upgrade.
pub const UPGRADES: &str = "upgrades";
/// The database files of a home.
const DATABASES: [&str; 2] = [store_embedded::DATABASE_FILE, "fortress.db"];

/// What `format.json` holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Recorded {
    /// The folder's layout ([`FORMAT`]).
    pub format: u32,
    /// The databases' schema (how many migrations ran).
    pub schema: usize,
    /// The release that last opened the home, `continuity <version> (<commit>)`.
    pub written_by: String,
}

impl Recorded {
    /// What this release writes.
    pub fn current() -> Self {
        Self { format: FORMAT, schema: store_embedded::db::SCHEMA, written_by: format!("continuity {}", crate::VERSION) }
    }
}

/// A home written by a newer release (the message names both); the CLI's next step is
/// installing that release.
#[derive(Debug)]
pub struct NewerHome(String);

impl std::fmt::Display for NewerHome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for NewerHome {}

/// What opening the home needs.
#[derive(Debug)]
pub enum Plan {
    /// No database yet: a new home; record its format once it is made.
    New,
    /// At this release's format: open it (and record this release if another wrote it).
    Current { recorded: Recorded },
    /// Older: copied to `backup` first; migrate, check and record after opening.
    Upgrade { from: String, backup: PathBuf },
}

/// Reads the home's format and, for an older home, takes its copy.
///
/// # Errors
/// A home written by a newer release (nothing touched), an unreadable `format.json` or
/// database, or a copy that could not be taken.
pub fn prepare(home: &Path) -> anyhow::Result<Plan> {
    let database = home.join(store_embedded::DATABASE_FILE);
    if !database.exists() {
        return Ok(Plan::New);
    }
    let recorded = read(home)?;
    // Each database's schema; the home's is the main database's, unless another is newer.
    let mut schemas = Vec::new();
    for name in DATABASES {
        let at = home.join(name);
        let found =
            store_embedded::db::schema_of(&at).map_err(|e| anyhow::anyhow!("reading {}: {}", at.display(), e.for_operator()))?;
        schemas.extend(found);
    }
    let newest = schemas.iter().copied().max().unwrap_or(0);
    let schema = if newest > store_embedded::db::SCHEMA { newest } else { schemas.first().copied().unwrap_or(0) };
    let format = recorded.as_ref().map_or(0, |r| r.format);
    let current = Recorded::current();
    if format > FORMAT || schema > current.schema {
        let by = recorded.as_ref().map_or("a newer release", |r| r.written_by.as_str());
        return Err(NewerHome(format!(
            "the home {} was written by {by} (home format {format}, database schema {schema}); this is continuity {} (home \
             format {FORMAT}, database schema {}), which cannot read it. Install the newer release (scripts/install.sh, or \
             `cargo install` from its source) or point at another home with --home DIR; nothing in this one was changed",
            home.display(),
            crate::VERSION,
            current.schema
        ))
        .into());
    }
    let older_schema = schemas.iter().any(|s| *s < current.schema);
    match recorded {
        Some(recorded) if format == FORMAT && !older_schema => Ok(Plan::Current { recorded }),
        recorded => {
            let from = recorded.map_or_else(
                || format!("home format 0 (no {FILE}), database schema {schema}"),
                |r| format!("{} (home format {}, database schema {})", r.written_by, r.format, r.schema),
            );
            let backup = back_up(home, format, schema)?;
            Ok(Plan::Upgrade { from, backup })
        }
    }
}

/// After the home opened (its databases migrated): records this release's format, and
/// for an upgrade checks the databases and says what happened on stderr.
///
/// # Errors
/// A database that fails its check after the upgrade (its copy is named), or
/// `format.json` that cannot be written.
pub fn finish(home: &Path, plan: &Plan) -> anyhow::Result<()> {
    let current = Recorded::current();
    match plan {
        Plan::Current { recorded } if *recorded == current => Ok(()),
        Plan::New | Plan::Current { .. } => write(home, &current),
        Plan::Upgrade { from, backup } => {
            for name in DATABASES {
                let at = home.join(name);
                if at.exists() {
                    store_embedded::db::verify(&at).map_err(|e| {
                        anyhow::anyhow!(
                            "after upgrading the home {}: {}. Its copy from before the upgrade is in {}: stop every \
                             continuity process, copy those files back into the home, and report this",
                            home.display(),
                            e.for_operator(),
                            backup.display()
                        )
                    })?;
                }
            }
            write(home, &current)?;
            eprintln!(
                "upgraded the home {} from {from} to {} (home format {}, database schema {}); checked. Its copy from \
                 before is in {}",
                home.display(),
                current.written_by,
                current.format,
                current.schema,
                backup.display()
            );
            Ok(())
        }
    }
}

/// The home's `format.json`, `None` for a home made before releases recorded it.
///
/// # Errors
/// A file that exists but cannot be read or parsed.
pub fn read(home: &Path) -> anyhow::Result<Option<Recorded>> {
    let path = home.join(FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    let recorded = serde_json::from_str(&text).with_context(|| {
        format!("{} is not a home format record (expected {{\"format\", \"schema\", \"written_by\"}})", path.display())
    })?;
    Ok(Some(recorded))
}

/// Writes `format.json` whole (a temporary file renamed over it).
fn write(home: &Path, recorded: &Recorded) -> anyhow::Result<()> {
    let path = home.join(FILE);
    let tmp = home.join(format!("{FILE}.tmp"));
    let mut text = serde_json::to_string_pretty(recorded)?;
    text.push('\n');
    std::fs::write(&tmp, text).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, &path).with_context(|| format!("writing {}", path.display()))
}

/// Copies each database (a consistent snapshot) and `format.json` into a new folder of
/// `upgrades/`.
fn back_up(home: &Path, format: u32, schema: usize) -> anyhow::Result<PathBuf> {
    let stamp = time::OffsetDateTime::now_utc().unix_timestamp();
    let name = format!("format{format}-schema{schema}-to-format{FORMAT}-schema{}-{stamp}", store_embedded::db::SCHEMA);
    let dir = home.join(UPGRADES).join(name);
    super::create_folder(&dir)?;
    for file in DATABASES {
        let from = home.join(file);
        if from.exists() {
            store_embedded::db::snapshot(&from, &dir.join(file))
                .map_err(|e| anyhow::anyhow!("copying {} before the upgrade: {}", from.display(), e.for_operator()))?;
        }
    }
    let recorded = home.join(FILE);
    if recorded.exists() {
        std::fs::copy(&recorded, dir.join(FILE)).with_context(|| format!("copying {}", recorded.display()))?;
    }
    Ok(dir)
}
