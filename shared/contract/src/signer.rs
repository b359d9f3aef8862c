//! Contract of the token signer: RS256 signatures that verify with the published keys,
//! and rotation that keeps the old key published.

use std::sync::Arc;

use ports::signer::TokenSigner;

/// A signer and the same key store after one rotation.
pub struct SignerFixture {
    pub before: Arc<dyn TokenSigner>,
    pub after: Arc<dyn TokenSigner>,
}

pub async fn signatures_verify_with_published_keys(f: SignerFixture) {
    let msg = b"eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0";
    let sig = f.before.sign(msg).await.unwrap();
    let keys = f.before.public_keys().await.unwrap();
    assert_eq!(keys[0].kid, sig.kid, "the signing key is listed first");
    let key = keys.iter().find(|k| k.kid == sig.kid).unwrap();
    assert_eq!((key.kty.as_str(), key.alg.as_str(), key.use_.as_str()), ("RSA", "RS256", "sig"));
    assert_eq!(sig.bytes.len(), 256, "RSA-2048");
    assert!(key.verify(msg, &sig.bytes));
    assert!(!key.verify(b"eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ5In0", &sig.bytes), "another message");
    let mut bad = sig.bytes.clone();
    bad[10] ^= 1;
    assert!(!key.verify(msg, &bad), "a flipped bit");
}

pub async fn rotation_keeps_old_keys_published(f: SignerFixture) {
    let msg = b"header.payload";
    let old = f.before.sign(msg).await.unwrap();
    let new = f.after.sign(msg).await.unwrap();
    assert_ne!(old.kid, new.kid, "a rotation signs with a new key");
    let keys = f.after.public_keys().await.unwrap();
    assert_eq!(keys[0].kid, new.kid);
    let old_key = keys.iter().find(|k| k.kid == old.kid).expect("the old key stays published");
    assert!(old_key.verify(msg, &old.bytes), "tokens signed before the rotation still verify");
    assert!(!old_key.verify(msg, &new.bytes));
}
