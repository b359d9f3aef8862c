//! Capability names: `<domain>.<resource>.<operation>` (`spine.entity.get`) or the two-part
//! names of the seed (`memory.search_org`). Parsing only checks the shape; whether a name
//! exists is the registry's answer.

use std::fmt;

use domain::{Error, ErrorCode};

/// The domains of SPEC §5.1.
pub const DOMAINS: &[&str] =
    &["spine", "memory", "session", "signal", "task", "proposal", "connector", "book", "kb", "playbook", "engineering"];

/// A well-formed capability name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CapabilityName(String);

fn not_found(raw: &str) -> Error {
    let shown: String = raw.chars().take(80).collect();
    Error::new(ErrorCode::CapabilityNotFound, format!("unknown capability {shown:?}"))
}

impl CapabilityName {
    /// Parses a name.
    ///
    /// # Errors
    /// `CAPABILITY_NOT_FOUND` for anything that is not 2–3 dot-separated `[a-z_]` parts
    /// starting with a known domain: a malformed name is as unknown as a missing one.
    pub fn parse(raw: &str) -> Result<Self, Error> {
        if raw.is_empty() || raw.len() > 96 {
            return Err(not_found(raw));
        }
        if well_formed(raw) { Ok(Self(raw.to_owned())) } else { Err(not_found(raw)) }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn domain(&self) -> &str {
        self.0.split('.').next().unwrap_or_default()
    }

    /// The operation: the last part (`get` in `spine.entity.get`, `search_org` in `memory.search_org`).
    pub fn operation(&self) -> &str {
        self.0.rsplit('.').next().unwrap_or_default()
    }
}

/// Whether `raw` is 2–3 dot-separated non-empty `[a-z_]` parts, the first a known
/// domain, at most 96 bytes. A `const fn`, so a capability's policy constant with a
/// malformed name does not compile.
pub(crate) const fn well_formed(raw: &str) -> bool {
    let b = raw.as_bytes();
    if b.is_empty() || b.len() > 96 {
        return false;
    }
    let (mut parts, mut part_len, mut first_end, mut i) = (1, 0, 0, 0);
    while i < b.len() {
        if b[i] == b'.' {
            if part_len == 0 {
                return false;
            }
            if parts == 1 {
                first_end = i;
            }
            parts += 1;
            part_len = 0;
        } else if b[i].is_ascii_lowercase() || b[i] == b'_' {
            part_len += 1;
        } else {
            return false;
        }
        i += 1;
    }
    if part_len == 0 || parts < 2 || parts > 3 {
        return false;
    }
    let mut d = 0;
    while d < DOMAINS.len() {
        if same(DOMAINS[d].as_bytes(), b.split_at(first_end).0) {
            return true;
        }
        d += 1;
    }
    false
}

const fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

impl fmt::Display for CapabilityName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grammar() {
        for ok in ["spine.entity.get", "memory.search_org", "connector.write", "playbook.handoff"] {
            assert!(CapabilityName::parse(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "spine",
            "spine.entity.get.more",
            "Spine.entity.get",
            "weather.today",
            "spine..get",
            "spine.entity.get ",
            "spine.ent1ty.get",
        ] {
            assert_eq!(CapabilityName::parse(bad).unwrap_err().code, ErrorCode::CapabilityNotFound, "{bad:?}");
        }
        let c = CapabilityName::parse("spine.entity.get").unwrap();
        assert_eq!((c.domain(), c.operation()), ("spine", "get"));
    }
}
