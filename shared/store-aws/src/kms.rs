//! RS256 signing through KMS asymmetric keys (`RSA_2048`, `SIGN_VERIFY`): the private
//! key never leaves KMS. Configured as a list of key ids or aliases, the signing key
//! first; rotation = create a new key, put it first, keep the old one listed until the
//! tokens it signed have expired (1 hour). Public keys come from `GetPublicKey` once and
//! are cached for the life of the process (they never change for a key id).
//!
//! Why KMS rather than a PEM in Secrets Manager: the key cannot be exfiltrated by a
//! compromised function or a logging mistake, every signature is in CloudTrail, and
//! the Lambda role needs only `kms:Sign` / `kms:GetPublicKey` on one key.

use async_trait::async_trait;
use aws_sdk_kms::primitives::Blob;
use aws_sdk_kms::types::{MessageType, SigningAlgorithmSpec};
use domain::{Error, Result};
use ports::signer::{PublicJwk, Signature, TokenSigner};
use tokio::sync::OnceCell;

use crate::unavailable;

/// KMS signs at most 4096 bytes in `RAW` mode; a JWT signing input is far smaller.
const MAX_RAW_MESSAGE: usize = 4096;

pub struct KmsSigner {
    client: aws_sdk_kms::Client,
    /// Key ids, ARNs or `alias/…`, the signing key first.
    keys: Vec<String>,
    public: OnceCell<Vec<PublicJwk>>,
}

/// Creates a KMS key of `spec` for `usage`; returns its id.
async fn create_key(
    client: &aws_sdk_kms::Client,
    description: &str,
    spec: aws_sdk_kms::types::KeySpec,
    usage: aws_sdk_kms::types::KeyUsageType,
) -> Result<String> {
    let out = client
        .create_key()
        .description(description)
        .key_spec(spec)
        .key_usage(usage)
        .send()
        .await
        .map_err(|e| unavailable("kms create key", &e))?;
    out.key_metadata().map(|m| m.key_id().to_owned()).ok_or_else(|| Error::unavailable("kms create key: no key id"))
}

impl KmsSigner {
    pub fn new(client: aws_sdk_kms::Client, keys: Vec<String>) -> Self {
        Self { client, keys, public: OnceCell::new() }
    }

    /// Creates an RSA-2048 signing key (for tests against moto and for bootstrapping).
    ///
    /// # Errors
    /// `UNAVAILABLE` when KMS refuses.
    pub async fn create_key(client: &aws_sdk_kms::Client, description: &str) -> Result<String> {
        create_key(client, description, aws_sdk_kms::types::KeySpec::Rsa2048, aws_sdk_kms::types::KeyUsageType::SignVerify).await
    }

    async fn keys(&self) -> Result<&Vec<PublicJwk>> {
        self.public
            .get_or_try_init(|| async {
                if self.keys.is_empty() {
                    return Err(Error::unavailable("no KMS signing key configured (CONTINUITY_JWT_KMS_KEYS)"));
                }
                let mut out = Vec::with_capacity(self.keys.len());
                for key in &self.keys {
                    let resp = self
                        .client
                        .get_public_key()
                        .key_id(key)
                        .send()
                        .await
                        .map_err(|e| unavailable("kms get public key", &e))?;
                    let der = resp.public_key().ok_or_else(|| Error::unavailable(format!("kms key {key}: no public key")))?;
                    // The kid is the key id, not the alias, so it names one key forever.
                    let kid = resp.key_id().map_or(key.as_str(), |id| id.rsplit('/').next().unwrap_or(id));
                    out.push(PublicJwk::from_rsa_der(kid, der.as_ref())?);
                }
                Ok(out)
            })
            .await
    }
}

#[async_trait]
impl TokenSigner for KmsSigner {
    async fn sign(&self, message: &[u8]) -> Result<Signature> {
        if message.len() > MAX_RAW_MESSAGE {
            return Err(Error::internal(format!("signing input of {} bytes exceeds KMS's {MAX_RAW_MESSAGE}", message.len())));
        }
        let kid = self.keys().await?.first().map(|k| k.kid.clone()).ok_or_else(|| Error::unavailable("no signing key"))?;
        let out = self
            .client
            .sign()
            .key_id(&self.keys[0])
            .message(Blob::new(message))
            .message_type(MessageType::Raw)
            .signing_algorithm(SigningAlgorithmSpec::RsassaPkcs1V15Sha256)
            .send()
            .await
            .map_err(|e| unavailable("kms sign", &e))?;
        let bytes = out.signature().ok_or_else(|| Error::unavailable("kms sign: no signature"))?.as_ref().to_vec();
        Ok(Signature { kid, bytes })
    }

    async fn public_keys(&self) -> Result<Vec<PublicJwk>> {
        self.keys().await.cloned()
    }
}

/// The AWS key store of the Spine vault: KMS `GenerateDataKey` (AES-256) and `Decrypt`
/// with a symmetric key, the tenant as encryption context (so a wrapped key copied to
/// another tenant does not decrypt, and CloudTrail names the tenant of every use).
pub struct KmsKeyWrapper {
    client: aws_sdk_kms::Client,
    key_id: String,
}

impl KmsKeyWrapper {
    pub fn new(client: aws_sdk_kms::Client, key_id: impl Into<String>) -> Self {
        Self { client, key_id: key_id.into() }
    }

    /// Creates a symmetric encryption key (tests and local stacks; the SAM template
    /// creates the real one). Returns its id.
    ///
    /// # Errors
    /// `UNAVAILABLE` when KMS cannot be reached.
    pub async fn create_key(client: &aws_sdk_kms::Client, description: &str) -> Result<String> {
        create_key(
            client,
            description,
            aws_sdk_kms::types::KeySpec::SymmetricDefault,
            aws_sdk_kms::types::KeyUsageType::EncryptDecrypt,
        )
        .await
    }
}

#[async_trait]
impl ports::vault::KeyWrapper for KmsKeyWrapper {
    async fn generate_data_key(&self, tenant: &domain::TenantId) -> Result<(Vec<u8>, Vec<u8>)> {
        let out = self
            .client
            .generate_data_key()
            .key_id(&self.key_id)
            .key_spec(aws_sdk_kms::types::DataKeySpec::Aes256)
            .encryption_context("tenant", tenant.as_str())
            .send()
            .await
            .map_err(|e| unavailable("kms generate data key", &e))?;
        let plain = out.plaintext().map(|b| b.as_ref().to_vec()).ok_or_else(|| Error::unavailable("kms: no plaintext key"))?;
        let wrapped =
            out.ciphertext_blob().map(|b| b.as_ref().to_vec()).ok_or_else(|| Error::unavailable("kms: no wrapped key"))?;
        Ok((plain, wrapped))
    }

    async fn unwrap_data_key(&self, tenant: &domain::TenantId, wrapped: &[u8]) -> Result<Vec<u8>> {
        let out = self
            .client
            .decrypt()
            .key_id(&self.key_id)
            .ciphertext_blob(Blob::new(wrapped.to_vec()))
            .encryption_context("tenant", tenant.as_str())
            .send()
            .await
            .map_err(|e| {
                if e.as_service_error().is_some_and(|s| s.is_invalid_ciphertext_exception()) {
                    Error::internal("a wrapped data key failed authentication")
                } else {
                    unavailable("kms decrypt", &e)
                }
            })?;
        out.plaintext().map(|b| b.as_ref().to_vec()).ok_or_else(|| Error::unavailable("kms: no plaintext key"))
    }
}
