//! The token-signing key store (SPEC §3.3): RS256 keys whose private half never leaves
//! it (a key file on embedded, KMS on AWS), and whose public halves are published as a
//! JWK Set. Rotation adds a key that signs from then on; old keys stay published until
//! the tokens they signed have expired.

use async_trait::async_trait;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use domain::{Error, Result};
use serde::{Deserialize, Serialize};

/// One public RSA key as a JWK (RFC 7517), for `/.well-known/jwks.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PublicJwk {
    pub kty: String,
    pub kid: String,
    #[serde(rename = "use")]
    pub use_: String,
    pub alg: String,
    /// Modulus, base64url without padding.
    pub n: String,
    /// Exponent, base64url without padding.
    pub e: String,
}

impl PublicJwk {
    /// The JWK of an RSA public key given as DER (`SubjectPublicKeyInfo` as KMS returns
    /// it, or PKCS#1 `RSAPublicKey`).
    ///
    /// # Errors
    /// `INTERNAL` when the DER is not an RSA public key.
    pub fn from_rsa_der(kid: &str, der: &[u8]) -> Result<Self> {
        let key = aws_lc_rs::rsa::PublicKey::from_der(der).map_err(|e| Error::internal(format!("public key {kid}: {e}")))?;
        Ok(Self {
            kty: "RSA".into(),
            kid: kid.to_owned(),
            use_: "sig".into(),
            alg: "RS256".into(),
            n: URL_SAFE_NO_PAD.encode(key.modulus().big_endian_without_leading_zero()),
            e: URL_SAFE_NO_PAD.encode(key.exponent().big_endian_without_leading_zero()),
        })
    }

    /// Verifies an RS256 signature with this key (tests and self-checks).
    pub fn verify(&self, message: &[u8], signature: &[u8]) -> bool {
        let (Ok(n), Ok(e)) = (URL_SAFE_NO_PAD.decode(&self.n), URL_SAFE_NO_PAD.decode(&self.e)) else { return false };
        let key = aws_lc_rs::signature::RsaPublicKeyComponents { n: &n, e: &e };
        key.verify(&aws_lc_rs::signature::RSA_PKCS1_2048_8192_SHA256, message, signature).is_ok()
    }
}

/// A signature and the `kid` of the key that made it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signature {
    pub kid: String,
    pub bytes: Vec<u8>,
}

#[async_trait]
pub trait TokenSigner: Send + Sync {
    /// Signs `message` with the current key, RSASSA-PKCS1-v1_5 with SHA-256 (RS256).
    ///
    /// # Errors
    /// `UNAVAILABLE` when the key store cannot be reached or holds no key.
    async fn sign(&self, message: &[u8]) -> Result<Signature>;

    /// Every published key, the current one first.
    ///
    /// # Errors
    /// `UNAVAILABLE` when the key store cannot be reached.
    async fn public_keys(&self) -> Result<Vec<PublicJwk>>;
}
