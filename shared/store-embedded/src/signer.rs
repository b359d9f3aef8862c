//! RS256 signing keys as files: `{home}/keys/jwt-{kid}.pk8` (PKCS#8 DER, mode 0600, in
//! a 0700 folder). The newest key (kids sort by creation time) signs; every key in the
//! folder is published, so a rotation keeps old tokens verifiable. Removing an old
//! file retires its key (do that once the tokens it signed have expired: 1 hour).

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use async_trait::async_trait;
use aws_lc_rs::encoding::AsDer;
use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::rsa::{KeyPair, KeySize};
use aws_lc_rs::signature::{KeyPair as _, RSA_PKCS1_SHA256};
use domain::{Error, Result, Timestamp};
use ports::signer::{PublicJwk, Signature, TokenSigner};

const PREFIX: &str = "jwt-";
const SUFFIX: &str = ".pk8";

struct Key {
    kid: String,
    pair: KeyPair,
    jwk: PublicJwk,
}

/// The embedded key store.
pub struct FileSigner {
    dir: PathBuf,
    /// Newest first.
    keys: RwLock<Vec<Arc<Key>>>,
}

fn io(what: &str, e: &std::io::Error) -> Error {
    Error::unavailable(format!("signing keys: {what}: {e}"))
}

fn load(dir: &Path) -> Result<Vec<Arc<Key>>> {
    let mut keys = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| io("read folder", &e))? {
        let entry = entry.map_err(|e| io("read folder", &e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(kid) = name.strip_prefix(PREFIX).and_then(|n| n.strip_suffix(SUFFIX)) else { continue };
        let der = std::fs::read(entry.path()).map_err(|e| io("read key", &e))?;
        let pair = KeyPair::from_pkcs8(&der).map_err(|e| Error::unavailable(format!("signing key {kid} is corrupt: {e}")))?;
        let jwk = PublicJwk::from_rsa_der(kid, pair.public_key().as_ref())?;
        keys.push(Arc::new(Key { kid: kid.to_owned(), pair, jwk }));
    }
    keys.sort_by(|a, b| b.kid.cmp(&a.kid));
    Ok(keys)
}

impl FileSigner {
    /// Opens the key folder, creating it and a first key when there is none.
    ///
    /// # Errors
    /// `UNAVAILABLE` when the folder cannot be read or written, or a key is corrupt.
    pub fn open(dir: &Path, now: Timestamp) -> Result<Self> {
        std::fs::create_dir_all(dir).map_err(|e| io("create folder", &e))?;
        crate::private::set_mode(dir, 0o700).map_err(|e| io("restrict folder", &e))?;
        let signer = Self { dir: dir.to_owned(), keys: RwLock::new(load(dir)?) };
        if signer.kids().is_empty() {
            signer.rotate(now)?;
        }
        Ok(signer)
    }

    /// Generates a new key that signs from now on; the old ones stay published.
    /// Returns the new `kid`.
    ///
    /// # Errors
    /// `UNAVAILABLE` when the key cannot be generated or written.
    pub fn rotate(&self, now: Timestamp) -> Result<String> {
        let pair = KeyPair::generate(KeySize::Rsa2048).map_err(|e| Error::unavailable(format!("key generation: {e}")))?;
        let der = pair.as_der().map_err(|e| Error::unavailable(format!("key encoding: {e}")))?;
        let kid = format!("{:013x}{:08x}", now.0.max(0), rand::random::<u32>());
        let path = self.dir.join(format!("{PREFIX}{kid}{SUFFIX}"));
        let tmp = self.dir.join(format!(".tmp-{kid}"));
        {
            let mut f = std::fs::OpenOptions::new().write(true).create_new(true).open(&tmp).map_err(|e| io("create key", &e))?;
            crate::private::set_mode(&tmp, 0o600).map_err(|e| io("restrict key", &e))?;
            f.write_all(der.as_ref()).map_err(|e| io("write key", &e))?;
            f.sync_all().map_err(|e| io("sync key", &e))?;
        }
        std::fs::rename(&tmp, &path).map_err(|e| io("install key", &e))?;
        let keys = load(&self.dir)?;
        *self.keys.write().map_err(|_| Error::internal("signing keys lock poisoned"))? = keys;
        Ok(kid)
    }

    /// Published key ids, newest (signing) first.
    pub fn kids(&self) -> Vec<String> {
        self.keys.read().map(|k| k.iter().map(|k| k.kid.clone()).collect()).unwrap_or_default()
    }

    fn current(&self) -> Result<Arc<Key>> {
        let keys = self.keys.read().map_err(|_| Error::internal("signing keys lock poisoned"))?;
        keys.first().cloned().ok_or_else(|| Error::unavailable("no signing key"))
    }
}

#[async_trait]
impl TokenSigner for FileSigner {
    async fn sign(&self, message: &[u8]) -> Result<Signature> {
        let key = self.current()?;
        let mut sig = vec![0; key.pair.public_modulus_len()];
        key.pair
            .sign(&RSA_PKCS1_SHA256, &SystemRandom::new(), message, &mut sig)
            .map_err(|e| Error::internal(format!("sign: {e}")))?;
        Ok(Signature { kid: key.kid.clone(), bytes: sig })
    }

    async fn public_keys(&self) -> Result<Vec<PublicJwk>> {
        let keys = self.keys.read().map_err(|_| Error::internal("signing keys lock poisoned"))?;
        Ok(keys.iter().map(|k| k.jwk.clone()).collect())
    }
}
