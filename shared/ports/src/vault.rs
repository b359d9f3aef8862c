//! The Spine vault (SPEC §4.2): entity payloads are encrypted at rest with AES-256-GCM.
//!
//! Envelope encryption: each tenant has its own 256-bit data key, stored only *wrapped*
//! by the key store ([`KeyWrapper`]: a key file on embedded, KMS `GenerateDataKey` /
//! `Decrypt` on AWS) at `(tenant, vault, dek)`. An entity's body is
//! `CTV1 ‖ nonce (12 random bytes) ‖ AES-256-GCM(JSON)`, with the item's own address
//! (`tenant/part/sk`) as associated data, so a ciphertext moved to another key or tenant
//! fails authentication instead of decrypting. Unwrapped keys are cached in process.
//! Bodies written before the vault existed (plain JSON) are still read, and encrypted
//! by their next write.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use async_trait::async_trait;
use aws_lc_rs::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use domain::{Error, ErrorCode, Result, TenantId};

use crate::items::{Condition, Item, ItemStore, Write};

/// Marks an encrypted body (version 1 of the format).
pub const MAGIC: &[u8; 4] = b"CTV1";
const DEK_PART: &str = "vault";
const DEK_SK: &str = "dek";

/// Wraps and unwraps data keys with a key that never leaves the key store.
#[async_trait]
pub trait KeyWrapper: Send + Sync {
    /// A fresh 256-bit data key for `tenant`: `(plaintext, wrapped)`.
    ///
    /// # Errors
    /// `UNAVAILABLE` when the key store cannot be reached.
    async fn generate_data_key(&self, tenant: &TenantId) -> Result<(Vec<u8>, Vec<u8>)>;
    /// The plaintext of a wrapped data key of `tenant`.
    ///
    /// # Errors
    /// `INTERNAL` when the wrapped key does not authenticate (wrong tenant, tampering);
    /// `UNAVAILABLE` when the key store cannot be reached.
    async fn unwrap_data_key(&self, tenant: &TenantId, wrapped: &[u8]) -> Result<Vec<u8>>;
}

/// Encrypts and decrypts entity payloads with per-tenant data keys.
pub struct Vault {
    wrapper: Arc<dyn KeyWrapper>,
    keys: RwLock<HashMap<TenantId, Arc<LessSafeKey>>>,
}

fn aead_key(bytes: &[u8]) -> Result<LessSafeKey> {
    UnboundKey::new(&AES_256_GCM, bytes).map(LessSafeKey::new).map_err(|_| Error::internal("a data key is not 256 bits"))
}

impl Vault {
    pub fn new(wrapper: Arc<dyn KeyWrapper>) -> Self {
        Self { wrapper, keys: RwLock::default() }
    }

    /// The tenant's data key: cached, else unwrapped from the store, else created (a
    /// conditional create: two processes racing agree on the winner's key).
    async fn key(&self, items: &dyn ItemStore, tenant: &TenantId) -> Result<Arc<LessSafeKey>> {
        if let Some(k) = self.keys.read().unwrap_or_else(std::sync::PoisonError::into_inner).get(tenant) {
            return Ok(k.clone());
        }
        let mut attempts = 0;
        let key = loop {
            attempts += 1;
            if let Some(item) = items.get(tenant.as_str(), DEK_PART, DEK_SK).await? {
                break aead_key(&self.wrapper.unwrap_data_key(tenant, &item.body).await?)?;
            }
            let (plain, wrapped) = self.wrapper.generate_data_key(tenant).await?;
            let item = Item { tenant: tenant.to_string(), part: DEK_PART.into(), sk: DEK_SK.into(), version: 1, body: wrapped };
            match items.write(vec![Write::Put { item, condition: Condition::Absent }]).await {
                Ok(()) => break aead_key(&plain)?,
                Err(e) if e.code == ErrorCode::Conflict && attempts < 3 => {}
                Err(e) => return Err(e),
            }
        };
        let key = Arc::new(key);
        self.keys.write().unwrap_or_else(std::sync::PoisonError::into_inner).insert(tenant.clone(), key.clone());
        Ok(key)
    }

    /// Whether `tenant`'s data key, if it has one, opens with the key store: the vault can
    /// read what it sealed. Creates nothing.
    ///
    /// # Errors
    /// `INTERNAL` when the stored data key does not unwrap (a different master key);
    /// `UNAVAILABLE` when the store or the key store cannot be reached.
    pub async fn check(&self, items: &dyn ItemStore, tenant: &TenantId) -> Result<()> {
        if self.keys.read().unwrap_or_else(std::sync::PoisonError::into_inner).contains_key(tenant) {
            return Ok(());
        }
        match items.get(tenant.as_str(), DEK_PART, DEK_SK).await? {
            Some(_) => self.key(items, tenant).await.map(|_| ()),
            None => Ok(()),
        }
    }

    /// Encrypts `plaintext`, bound to the item address `aad`.
    ///
    /// # Errors
    /// As for the key; `INTERNAL` if encryption fails.
    pub async fn seal(&self, items: &dyn ItemStore, tenant: &TenantId, aad: &str, plaintext: &[u8]) -> Result<Vec<u8>> {
        let key = self.key(items, tenant).await?;
        let mut nonce = [0u8; NONCE_LEN];
        rand::fill(&mut nonce[..]);
        let mut out = Vec::with_capacity(MAGIC.len() + NONCE_LEN + plaintext.len() + 16);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&nonce);
        let mut sealed = plaintext.to_vec();
        key.seal_in_place_append_tag(Nonce::assume_unique_for_key(nonce), Aad::from(aad.as_bytes()), &mut sealed)
            .map_err(|_| Error::internal("encryption failed"))?;
        out.extend_from_slice(&sealed);
        Ok(out)
    }

    /// Decrypts a body written by [`Self::seal`] for the same address; a plain (legacy)
    /// body is returned as it is.
    ///
    /// # Errors
    /// `INTERNAL` when the body does not authenticate (tampered, truncated, or moved from
    /// another address); as for the key.
    pub async fn open(&self, items: &dyn ItemStore, tenant: &TenantId, aad: &str, body: &[u8]) -> Result<Vec<u8>> {
        let Some(rest) = body.strip_prefix(MAGIC.as_slice()) else { return Ok(body.to_vec()) };
        if rest.len() < NONCE_LEN + 16 {
            return Err(Error::internal("an encrypted payload is truncated"));
        }
        let key = self.key(items, tenant).await?;
        let (nonce, sealed) = rest.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| Error::internal("bad nonce"))?;
        let mut buf = sealed.to_vec();
        let plain = key
            .open_in_place(nonce, Aad::from(aad.as_bytes()), &mut buf)
            .map_err(|_| Error::internal("an encrypted payload failed authentication"))?;
        Ok(plain.to_vec())
    }
}
