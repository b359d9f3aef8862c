//! Password hashing: argon2id with the crate's defaults (19 MiB, 2 passes), PHC strings.

use argon2::Argon2;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use domain::{Error, Result};

/// Shortest password accepted.
pub const MIN_PASSWORD_LEN: usize = 12;
/// Longest password accepted (argon2 takes any length; this bounds the work).
pub const MAX_PASSWORD_LEN: usize = 1024;

/// # Errors
/// `INVALID_REQUEST` for a password outside the length bounds.
pub fn hash(password: &str) -> Result<String> {
    if password.chars().count() < MIN_PASSWORD_LEN || password.len() > MAX_PASSWORD_LEN {
        return Err(Error::invalid_field("password", format!("must be {MIN_PASSWORD_LEN} to {MAX_PASSWORD_LEN} characters")));
    }
    let salt = SaltString::encode_b64(&rand::random::<[u8; 16]>()).map_err(|e| Error::internal(format!("salt: {e}")))?;
    Ok(Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map_err(|e| Error::internal(format!("argon2: {e}")))?
        .to_string())
}

/// Checks `password` against a PHC string; a malformed hash never matches.
pub fn verify(password: &str, phc: &str) -> bool {
    if password.len() > MAX_PASSWORD_LEN {
        return false;
    }
    PasswordHash::new(phc).is_ok_and(|h| Argon2::default().verify_password(password.as_bytes(), &h).is_ok())
}

/// Burns the time of one verification, so an unknown user answers as slowly as a wrong password.
pub fn verify_dummy(password: &str) {
    static DUMMY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let phc = DUMMY.get_or_init(|| hash("dummy-password-for-timing").unwrap_or_default());
    let _ = verify(password, phc);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_verify_and_are_salted() {
        let a = hash("correct horse battery").unwrap();
        let b = hash("correct horse battery").unwrap();
        assert_ne!(a, b);
        assert!(a.starts_with("$argon2id$"));
        assert!(verify("correct horse battery", &a));
        assert!(!verify("correct horse batterY", &a));
        assert!(!verify("x", "not a phc string"));
        assert!(hash("short").is_err());
    }
}
