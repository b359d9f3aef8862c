//! Readiness of the embedded backend: the home folder's filesystem has room to write,
//! and SQLite has not found the database file damaged.

use std::path::PathBuf;

use async_trait::async_trait;
use ports::health::{Check, Readiness};

use crate::Db;

/// Below this much free space writes are refused as they come (SQLite cannot grow its
/// WAL), so the server is not ready.
pub const MIN_FREE_BYTES: u64 = 16 * 1024 * 1024;

pub struct EmbeddedReadiness {
    db: Db,
    /// Where free space is read (on Unix only).
    #[cfg_attr(not(unix), allow(dead_code))]
    home: PathBuf,
}

impl EmbeddedReadiness {
    pub fn new(db: Db, home: PathBuf) -> Self {
        Self { db, home }
    }

    /// Off Unix (Windows) free space is not read: the check passes, and a full disk shows
    /// as refused writes instead (docs/limitations.md).
    #[cfg(not(unix))]
    fn disk(&self) -> Check {
        Check::ok("disk")
    }

    #[cfg(unix)]
    fn disk(&self) -> Check {
        match rustix::fs::statvfs(&self.home) {
            Ok(s) => {
                let free = s.f_bavail.saturating_mul(s.f_frsize);
                if free < MIN_FREE_BYTES {
                    Check::failed(
                        "disk",
                        format!(
                            "{} KiB free under {} (at least {} MiB needed): free space, then writes resume",
                            free / 1024,
                            self.home.display(),
                            MIN_FREE_BYTES / (1024 * 1024)
                        ),
                    )
                } else {
                    Check::ok("disk")
                }
            }
            Err(e) => Check::failed("disk", format!("cannot read the free space of {}: {e}", self.home.display())),
        }
    }
}

#[async_trait]
impl Readiness for EmbeddedReadiness {
    async fn check(&self) -> Vec<Check> {
        let file = if self.db.is_damaged() {
            Check::failed(
                "database",
                format!(
                    "{} is damaged: stop the server, restore the home from a backup or rebuild it with `continuity restore`",
                    self.db.path().display()
                ),
            )
        } else {
            Check::ok("database")
        };
        vec![self.disk(), file]
    }
}
