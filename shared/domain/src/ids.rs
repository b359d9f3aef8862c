//! Identifiers, parsed once at the edge (parse, don't validate).

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::error::Error;

/// Maximum length of any identifier accepted from outside.
pub const MAX_ID_LEN: usize = 128;

fn check_chars(kind: &'static str, raw: &str, max: usize, allowed: impl Fn(char) -> bool) -> Result<(), Error> {
    if raw.is_empty() {
        return Err(Error::invalid_field(kind, "must not be empty"));
    }
    if raw.len() > max {
        return Err(Error::invalid_field(kind, format!("must be at most {max} characters")));
    }
    if let Some(bad) = raw.chars().find(|c| !allowed(*c)) {
        return Err(Error::invalid_field(kind, format!("contains the character {bad:?}, which is not allowed")));
    }
    Ok(())
}

/// A tenant slug: 2–63 characters of `a-z`, `0-9` and `-`, starting with a letter.
///
/// The slug leads every storage key, so it must never contain the key separator `#`
/// nor anything a path or a Redis key could misread.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct TenantId(String);

impl TenantId {
    /// Parses a tenant slug.
    ///
    /// # Errors
    /// `INVALID_REQUEST` when the slug is empty, too long, or has characters outside `a-z0-9-`.
    pub fn new(raw: impl Into<String>) -> Result<Self, Error> {
        let raw = raw.into();
        check_chars("tenant", &raw, 63, |c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')?;
        if raw.len() < 2 || !raw.starts_with(|c: char| c.is_ascii_lowercase()) || raw.ends_with('-') {
            return Err(Error::invalid_field("tenant", "must be 2-63 characters, start with a letter and not end with '-'"));
        }
        Ok(Self(raw))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The deployment itself, as the owner of what belongs to no tenant (the sources'
    /// app credentials, sealed under the deployment's own data key). It is the registry
    /// partition's name, `_registry`, which no tenant slug can be (a slug starts with a
    /// letter), and it never parses: it is only ever made here.
    pub fn deployment() -> Self {
        Self("_registry".to_owned())
    }
}

impl TryFrom<String> for TenantId {
    type Error = Error;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        Self::new(value)
    }
}

impl From<TenantId> for String {
    fn from(value: TenantId) -> Self {
        value.0
    }
}

impl fmt::Display for TenantId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A canonical entity type name, `snake_case` (`account`, `patient`, `subscription`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct EntityType(String);

impl EntityType {
    /// Parses an entity type name.
    ///
    /// # Errors
    /// `INVALID_REQUEST` unless the name is 1–64 characters of `a-z`, `0-9` and `_`, starting with a letter.
    pub fn new(raw: impl Into<String>) -> Result<Self, Error> {
        let raw = raw.into();
        check_chars("type", &raw, 64, |c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')?;
        if !raw.starts_with(|c: char| c.is_ascii_lowercase()) {
            return Err(Error::invalid_field("type", "must start with a letter"));
        }
        Ok(Self(raw))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for EntityType {
    type Error = Error;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        Self::new(value)
    }
}

impl From<EntityType> for String {
    fn from(value: EntityType) -> Self {
        value.0
    }
}

impl fmt::Display for EntityType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// An opaque record identifier: 1–128 printable ASCII characters without whitespace,
/// `#` (our key separator) or `/` (a path separator for blobs).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Id(String);

/// With the `schema` feature: a string of 1–128 characters.
#[cfg(feature = "schema")]
impl schemars::JsonSchema for Id {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Id".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({ "type": "string", "minLength": 1, "maxLength": 128 })
    }
}

/// Entities are addressed by `(type, id)`; the id part is an [`Id`].
pub type EntityId = Id;

impl Id {
    /// Parses an identifier.
    ///
    /// # Errors
    /// `INVALID_REQUEST` when it is empty, longer than 128 characters or contains whitespace, `#` or `/`.
    pub fn new(raw: impl Into<String>) -> Result<Self, Error> {
        let raw = raw.into();
        check_chars("id", &raw, MAX_ID_LEN, |c| c.is_ascii_graphic() && c != '#' && c != '/')?;
        Ok(Self(raw))
    }

    /// A fresh, time-ordered identifier (UUIDv7-like: millisecond prefix, random suffix).
    pub fn generate(now: Timestamp, random: u64) -> Self {
        Self(format!("{:013x}{:016x}", now.0.max(0), random))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for Id {
    type Error = Error;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        Self::new(value)
    }
}

impl From<Id> for String {
    fn from(value: Id) -> Self {
        value.0
    }
}

impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Milliseconds since the Unix epoch, UTC. Every record carries these.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, Default)]
#[serde(transparent)]
pub struct Timestamp(pub i64);

impl Timestamp {
    /// RFC 3339 rendering for people and JSON payloads.
    pub fn to_rfc3339(self) -> String {
        let nanos = i128::from(self.0) * 1_000_000;
        time::OffsetDateTime::from_unix_timestamp_nanos(nanos)
            .ok()
            .and_then(|t| t.format(&time::format_description::well_known::Rfc3339).ok())
            .unwrap_or_else(|| self.0.to_string())
    }

    pub fn plus_millis(self, ms: i64) -> Self {
        Self(self.0.saturating_add(ms))
    }

    /// Parses an RFC 3339 time (`2026-03-01T09:30:00Z`, any offset) or a date alone
    /// (`2026-03-01`, midnight UTC), for argument `field`.
    ///
    /// # Errors
    /// `INVALID_REQUEST` naming `field`.
    pub fn parse(field: &str, raw: &str) -> Result<Self, Error> {
        use time::format_description::well_known::Rfc3339;
        let bad = || Error::invalid_field(field, "expected an RFC 3339 time (2026-03-01T09:30:00Z) or a date (2026-03-01)");
        let raw = raw.trim();
        let at = if raw.len() == 10 {
            time::OffsetDateTime::parse(&format!("{raw}T00:00:00Z"), &Rfc3339).map_err(|_| bad())?
        } else {
            time::OffsetDateTime::parse(raw, &Rfc3339).map_err(|_| bad())?
        };
        i64::try_from(at.unix_timestamp_nanos() / 1_000_000).map(Self).map_err(|_| bad())
    }
}

/// Parsing from text (command-line arguments): the same checks as the constructors.
macro_rules! from_str_by_new {
    ($($t:ty),+) => {$(
        impl std::str::FromStr for $t {
            type Err = crate::error::Error;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Self::new(s)
            }
        }
    )+};
}

from_str_by_new!(TenantId, EntityType, Id);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_parse_from_rfc3339_or_a_date() {
        assert_eq!(Timestamp::parse("since", "1970-01-02").unwrap(), Timestamp(86_400_000));
        assert_eq!(Timestamp::parse("since", "1970-01-01T01:00:00+01:00").unwrap(), Timestamp(0));
        assert_eq!(Timestamp::parse("since", "2026-03-01T09:30:00.250Z").unwrap().to_rfc3339(), "2026-03-01T09:30:00.25Z");
        for bad in ["yesterday", "2026-13-01", "", "2026-03-01T09:30"] {
            let e = Timestamp::parse("since", bad).unwrap_err();
            assert!(e.message.contains("since"), "{bad}: {e:?}");
        }
    }

    #[test]
    fn tenant_slugs_are_strict() {
        assert!(TenantId::new("acme").is_ok());
        assert!(TenantId::new("acme-eu-1").is_ok());
        for bad in ["", "a", "Acme", "1acme", "acme-", "ac#me", "ac me", "ac/me", &"a".repeat(64)] {
            assert!(TenantId::new(bad).is_err(), "{bad:?} must be rejected");
        }
    }

    #[test]
    fn ids_reject_separators() {
        assert!(Id::new("acct-42").is_ok());
        assert!(Id::new("a#b").is_err());
        assert!(Id::new("a/b").is_err());
        assert!(Id::new("a b").is_err());
        assert!(Id::new("x".repeat(129)).is_err());
    }

    #[test]
    fn generated_ids_sort_by_time() {
        let a = Id::generate(Timestamp(1), u64::MAX);
        let b = Id::generate(Timestamp(2), 0);
        assert!(a < b);
    }

    #[test]
    fn timestamps_render_rfc3339() {
        assert_eq!(Timestamp(0).to_rfc3339(), "1970-01-01T00:00:00Z");
    }
}
