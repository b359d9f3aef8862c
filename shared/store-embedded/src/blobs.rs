//! Blobs as files: `{root}/{tenant}/{path}`, written atomically (temp file, fsync, rename).

use std::path::{Path, PathBuf};

use async_trait::async_trait;
use domain::{Error, Result, TenantId};
use ports::blob::{BlobKey, BlobStore, MAX_BLOB_BYTES};

pub struct FileBlobs {
    root: PathBuf,
}

fn io(e: std::io::Error) -> Error {
    Error::unavailable(format!("blob store: {e}"))
}

impl FileBlobs {
    /// # Errors
    /// `UNAVAILABLE` when the folder cannot be created.
    pub fn new(root: PathBuf) -> Result<Self> {
        std::fs::create_dir_all(&root).map_err(io)?;
        Ok(Self { root })
    }

    fn path_of(&self, key: &BlobKey) -> PathBuf {
        // BlobKey guarantees no `..`, no absolute paths and no empty segments.
        self.root.join(key.tenant().as_str()).join(key.path())
    }
}

fn walk(dir: &Path, rel: &str, out: &mut Vec<String>) -> std::io::Result<()> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with(".tmp-") {
            continue;
        }
        let child = if rel.is_empty() { name.clone() } else { format!("{rel}/{name}") };
        if entry.file_type()?.is_dir() {
            walk(&entry.path(), &child, out)?;
        } else {
            out.push(child);
        }
    }
    Ok(())
}

#[async_trait]
impl BlobStore for FileBlobs {
    async fn put(&self, key: &BlobKey, bytes: &[u8]) -> Result<()> {
        if bytes.len() > MAX_BLOB_BYTES {
            return Err(Error::invalid(format!("a blob is at most {MAX_BLOB_BYTES} bytes")));
        }
        let path = self.path_of(key);
        let bytes = bytes.to_vec();
        tokio::task::spawn_blocking(move || -> std::io::Result<()> {
            use std::io::Write as _;
            let dir = path.parent().ok_or_else(|| std::io::Error::other("blob path has no parent"))?;
            std::fs::create_dir_all(dir)?;
            let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            let tmp = dir.join(format!(".tmp-{name}-{}", std::process::id()));
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(&bytes)?;
            f.sync_all()?;
            std::fs::rename(&tmp, &path)?;
            std::fs::File::open(dir)?.sync_all()
        })
        .await
        .map_err(|e| Error::internal(format!("blob worker: {e}")))?
        .map_err(io)
    }

    async fn delete(&self, key: &BlobKey) -> Result<()> {
        match tokio::fs::remove_file(self.path_of(key)).await {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io(e)),
        }
    }

    async fn get(&self, key: &BlobKey) -> Result<Option<Vec<u8>>> {
        match tokio::fs::read(self.path_of(key)).await {
            Ok(b) => Ok(Some(b)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io(e)),
        }
    }

    async fn list(&self, tenant: &TenantId, prefix: &str, after: Option<&str>, limit: u32) -> Result<Vec<BlobKey>> {
        let dir = self.root.join(tenant.as_str());
        let mut paths = tokio::task::spawn_blocking(move || {
            let mut out = Vec::new();
            walk(&dir, "", &mut out).map(|()| out)
        })
        .await
        .map_err(|e| Error::internal(format!("blob worker: {e}")))?
        .map_err(io)?;
        paths.sort();
        paths
            .into_iter()
            .filter(|p| p.starts_with(prefix) && after.is_none_or(|a| p.as_str() > a))
            .take(usize::try_from(limit.clamp(1, 1000)).unwrap_or(1000))
            .map(|p| BlobKey::new(tenant, &p))
            .collect()
    }
}
