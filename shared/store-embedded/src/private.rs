//! Files and folders their owner alone may read, on every platform.
//!
//! On Unix by their mode: files 0600, folders 0700. Other platforms (Windows) have no
//! mode bits: a new file takes the access list of the folder it is made in — a home
//! under the user's profile is the user's alone — so these are the plain calls there.
//! Every use of `std::os::unix` in the embedded backend and `continuity` goes through
//! here or sits under `#[cfg(unix)]` (`tests/layering.rs` checks it).

use std::fs::{DirBuilder, Metadata, OpenOptions};
use std::io;
use std::path::Path;

/// Options that create a file readable and writable by its owner alone.
#[must_use]
pub fn file_options() -> OpenOptions {
    #[cfg_attr(not(unix), allow(unused_mut))]
    let mut options = OpenOptions::new();
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options
}

/// Creates `path` and its missing parents, each new folder open to its owner alone.
///
/// # Errors
/// When a folder cannot be created.
pub fn create_dir_all(path: &Path) -> io::Result<()> {
    let mut builder = DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(path)
}

/// Sets a file's permission bits (`0o600`, `0o755`); nothing off Unix.
///
/// # Errors
/// When the permissions cannot be changed.
#[cfg(unix)]
pub fn set_mode(path: &Path, mode: u32) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
}

/// Sets a file's permission bits (`0o600`, `0o755`); nothing off Unix.
///
/// # Errors
/// Never off Unix.
#[cfg(not(unix))]
pub fn set_mode(_path: &Path, _mode: u32) -> io::Result<()> {
    Ok(())
}

/// A file's permission bits (`0o7777` of its mode); `None` off Unix.
#[cfg(unix)]
#[must_use]
pub fn mode(meta: &Metadata) -> Option<u32> {
    use std::os::unix::fs::PermissionsExt as _;
    Some(meta.permissions().mode() & 0o7777)
}

/// A file's permission bits (`0o7777` of its mode); `None` off Unix.
#[cfg(not(unix))]
#[must_use]
pub fn mode(_meta: &Metadata) -> Option<u32> {
    None
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn files_and_folders_are_the_owners_alone() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("a/b");
        create_dir_all(&folder).unwrap();
        let file = folder.join("key");
        file_options().write(true).create_new(true).open(&file).unwrap();
        assert_eq!(mode(&std::fs::metadata(dir.path().join("a")).unwrap()), Some(0o700));
        assert_eq!(mode(&std::fs::metadata(&folder).unwrap()), Some(0o700));
        assert_eq!(mode(&std::fs::metadata(&file).unwrap()), Some(0o600));
        set_mode(&file, 0o640).unwrap();
        assert_eq!(mode(&std::fs::metadata(&file).unwrap()), Some(0o640));
    }
}
