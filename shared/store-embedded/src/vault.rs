//! The embedded key store of the Spine vault: one 256-bit master key in
//! `{home}/keys/vault.key` (0600 in a 0700 folder, created on first use) wraps each
//! tenant's data key with AES-256-GCM, the tenant id as associated data (a wrapped key
//! copied to another tenant does not unwrap).

use std::io::Write as _;
use std::path::Path;

use async_trait::async_trait;
use aws_lc_rs::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use domain::{Error, ErrorCode, Result, TenantId};
use ports::vault::KeyWrapper;

pub struct FileKeyWrapper {
    master: LessSafeKey,
}

impl FileKeyWrapper {
    /// Opens (creating if needed) the master key file in `dir`.
    ///
    /// # Errors
    /// `UNAVAILABLE` when the file cannot be created or read, or is not a 32-byte key.
    pub fn open(dir: &Path) -> Result<Self> {
        Self::open_with(dir, true)
    }

    /// Opens the master key file in `dir` for data already sealed under it (`sample`: a
    /// tenant and its wrapped data key from the store): the file must exist — a new key
    /// would silently make every sealed entity unreadable — and must unwrap the sample.
    /// Without a sample (nothing sealed yet) it is created if needed.
    ///
    /// # Errors
    /// `UNAVAILABLE`, with an operator's message naming the file and the way back, when
    /// the key is missing or is not the one the data was sealed with.
    pub fn open_for(dir: &Path, sample: Option<(TenantId, Vec<u8>)>) -> Result<Self> {
        let path = dir.join("vault.key");
        let Some((tenant, wrapped)) = sample else { return Self::open(dir) };
        let refuse = |what: String| {
            let mut e = Error::unavailable(what);
            e.message = "the vault key does not match the data; the server cannot start".into();
            e
        };
        let wrapper = match Self::open_with(dir, false) {
            Ok(w) => w,
            Err(e) if e.code == ErrorCode::NotFound => {
                return Err(refuse(format!(
                    "{} is missing, but this home's data is sealed under it. Put the file back from your backup of the \
                     home (keys/vault.key, mode 0600) and start again. Without it the sealed entities cannot be read: \
                     to start over, move continuity.db and fortress.db aside and run `continuity restore` to rebuild \
                     the Spine from the blob backups",
                    path.display()
                )));
            }
            Err(e) => return Err(e),
        };
        if wrapper.unwrap_sync(&tenant, &wrapped).is_err() {
            return Err(refuse(format!(
                "{} is not the key this home's data was sealed with (it was replaced?). Put the original file back \
                 from your backup of the home and start again; nothing was changed",
                path.display()
            )));
        }
        Ok(wrapper)
    }

    fn open_with(dir: &Path, create: bool) -> Result<Self> {
        let io = |what: &str, e: std::io::Error| Error::unavailable(format!("vault key {what}: {e}"));
        crate::private::create_dir_all(dir).map_err(|e| io("folder", e))?;
        let path = dir.join("vault.key");
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !create => {
                return Err(Error::not_found(path.display().to_string()));
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let mut key = [0u8; 32];
                rand::fill(&mut key[..]);
                match crate::private::file_options().write(true).create_new(true).open(&path) {
                    Ok(mut f) => {
                        f.write_all(&key).map_err(|e| io("write", e))?;
                        f.sync_all().map_err(|e| io("sync", e))?;
                        key.to_vec()
                    }
                    // Another process created it first: use theirs.
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => std::fs::read(&path).map_err(|e| io("read", e))?,
                    Err(e) => return Err(io("create", e)),
                }
            }
            Err(e) => return Err(io("read", e)),
        };
        let unbound = UnboundKey::new(&AES_256_GCM, &bytes).map_err(|_| {
            let mut e = Error::unavailable(format!("{} is not a 32-byte key", path.display()));
            e.message = "the vault key does not match the data; the server cannot start".into();
            e
        })?;
        Ok(Self { master: LessSafeKey::new(unbound) })
    }

    fn unwrap_sync(&self, tenant: &TenantId, wrapped: &[u8]) -> Result<Vec<u8>> {
        if wrapped.len() < NONCE_LEN + 16 {
            return Err(Error::internal("a wrapped data key is truncated"));
        }
        let (nonce, sealed) = wrapped.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| Error::internal("bad nonce"))?;
        let mut buf = sealed.to_vec();
        let plain = self
            .master
            .open_in_place(nonce, Aad::from(tenant.as_str().as_bytes()), &mut buf)
            .map_err(|_| Error::internal("a wrapped data key failed authentication"))?;
        Ok(plain.to_vec())
    }
}

#[async_trait]
impl KeyWrapper for FileKeyWrapper {
    async fn generate_data_key(&self, tenant: &TenantId) -> Result<(Vec<u8>, Vec<u8>)> {
        let mut plain = vec![0u8; 32];
        rand::fill(&mut plain[..]);
        let mut nonce = [0u8; NONCE_LEN];
        rand::fill(&mut nonce[..]);
        let mut sealed = plain.clone();
        self.master
            .seal_in_place_append_tag(Nonce::assume_unique_for_key(nonce), Aad::from(tenant.as_str().as_bytes()), &mut sealed)
            .map_err(|_| Error::internal("wrapping a data key failed"))?;
        let mut wrapped = nonce.to_vec();
        wrapped.extend_from_slice(&sealed);
        Ok((plain, wrapped))
    }

    async fn unwrap_data_key(&self, tenant: &TenantId, wrapped: &[u8]) -> Result<Vec<u8>> {
        self.unwrap_sync(tenant, wrapped)
    }
}
