//! [`FileEpoch`]: the credentials' change signal of a home folder
//! ([`ports::records::CredentialEpoch`]). Every API key revocation, by any process on
//! the home (`serve`, the CLI beside it), replaces one small file by a rename; every
//! request compares the file's identity (`stat`: inode, modification time, length) with
//! what it saw when it cached a key record. One system call per request instead of a
//! database read; a revocation holds for the very next request of every process.

use std::hash::{Hash, Hasher};
use std::path::PathBuf;

use domain::{Error, Result};
use rand::RngCore;

/// The file the signal lives in, in the home folder.
pub const EPOCH_FILE: &str = "credentials.epoch";

#[derive(Debug, Clone)]
pub struct FileEpoch {
    path: PathBuf,
}

impl FileEpoch {
    pub fn new(home: &std::path::Path) -> Self {
        Self { path: home.join(EPOCH_FILE) }
    }
}

impl ports::records::CredentialEpoch for FileEpoch {
    fn current(&self) -> u64 {
        let meta = match std::fs::metadata(&self.path) {
            Ok(m) => m,
            // Never revoked anything yet.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return 0,
            // Unreadable: a value no cached record holds, so every request reads its key.
            Err(_) => return rand::rng().next_u64() | 1,
        };
        let mut h = std::collections::hash_map::DefaultHasher::new();
        meta.len().hash(&mut h);
        meta.modified().ok().hash(&mut h);
        #[cfg(unix)]
        std::os::unix::fs::MetadataExt::ino(&meta).hash(&mut h);
        h.finish() | 1
    }

    fn bump(&self) -> Result<()> {
        // A new file renamed over the old: a new inode and new contents each time, so
        // two bumps within the clock's resolution still differ.
        let mut nonce = [0u8; 16];
        rand::rng().fill_bytes(&mut nonce);
        let tmp = self.path.with_extension(format!("epoch.{:016x}", rand::rng().next_u64()));
        let fail = |e: std::io::Error| Error::unavailable(format!("the credentials' change signal could not be written: {e}"));
        std::fs::write(&tmp, nonce).map_err(fail)?;
        std::fs::rename(&tmp, &self.path).map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            fail(e)
        })
    }
}

#[cfg(test)]
mod tests {
    use ports::records::CredentialEpoch;

    use super::*;

    #[test]
    fn every_bump_changes_the_value_seen_by_another_reader() {
        let home = tempfile::tempdir().unwrap();
        let (writer, reader) = (FileEpoch::new(home.path()), FileEpoch::new(home.path()));
        assert_eq!(reader.current(), 0, "nothing revoked yet");
        let mut seen = std::collections::HashSet::from([reader.current()]);
        for _ in 0..20 {
            writer.bump().unwrap();
            let now = reader.current();
            assert!(seen.insert(now), "a bump within the clock's resolution still changes the value");
            assert_eq!(reader.current(), now, "stable while nothing changes");
        }
        let left: Vec<_> = std::fs::read_dir(home.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left, [std::ffi::OsString::from(EPOCH_FILE)], "no temporary file is left");
    }
}
