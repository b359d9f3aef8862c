//! The normalizer's declarative mappings (`mappings.json`, data rather than code): how a
//! source-native record becomes a canonical Spine entity, its relationships and the
//! fields whose changes are signals.
//!
//! What survives into the Spine is canonical only: the entity type, the canonical field
//! names, and an id derived from the source's id by hashing (`{type}-{20 hex}`), so the
//! source tool's name and field names are never stored in a Spine record — only the raw
//! blob the loader keeps has them.
//!
//! Paths are dotted (`properties.name`, `items.data.0.price.nickname`; a number indexes
//! an array). A field is a path, or an object:
//! `{"path": P, "as": "string|integer|number|boolean|date|cents|not"}` (a conversion),
//! `{"join": [P, …]}` (non-empty parts joined by a space), or `{"ref": TYPE, "path": P}`
//! (the canonical id of the `TYPE` record the source calls P).
//!
//! An object is recognised by its `match`: one matcher on a path (exactly one of
//! `equals`, `one_of`, `contains`, `prefix` or `exists`), `{"all": [...]}` (every one),
//! or a list of those of which any may match — sources send the same object in several
//! shapes (HubSpot names companies `companies`, `company` or `0-2`; Salesforce records
//! come with `attributes.type`, or without `attributes` at all, and then only the id's
//! three-character key prefix says what they are).

use std::collections::BTreeMap;
use std::sync::OnceLock;

use domain::EntityType;
use domain::value::{Attributes, Value};
use domain::{Error, Id, Result, Timestamp};
use serde::Deserialize;
use serde_json::Value as Json;
use sha2::{Digest, Sha256};

const MAPPINGS: &str = include_str!("mappings.json");

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Document {
    #[allow(dead_code)]
    version: u32,
    sources: BTreeMap<String, SourceMapping>,
}

/// One source's mapping.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceMapping {
    /// What the records look like, for people (`GET /v1/connectors`, 404 bodies).
    pub title: String,
    objects: Vec<ObjectMapping>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ObjectMapping {
    /// How a record of this kind is recognised: one matcher, or a list of which any
    /// may match (sources send the same object in several shapes).
    #[serde(rename = "match")]
    matcher: Matchers,
    /// Where the object sits inside the record (webhook envelopes), if not at the top.
    #[serde(default)]
    unwrap: Option<String>,
    entity_type: String,
    /// Path of the source's id (in the object).
    id: String,
    /// Path of the source's last-modified time (in the record, before unwrapping).
    updated_at: String,
    fields: BTreeMap<String, FieldSpec>,
    #[serde(default)]
    relationships: Vec<RelSpec>,
    /// Canonical field → signal kind emitted when its value changes.
    #[serde(default)]
    signals: BTreeMap<String, String>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Matchers {
    One(Clause),
    Any(Vec<Clause>),
}

/// One matcher, or `{"all": [...]}`: every one of several.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Clause {
    All { all: Vec<Matcher> },
    One(Matcher),
}

impl Clause {
    fn matches(&self, record: &Json) -> bool {
        match self {
            Self::All { all } => !all.is_empty() && all.iter().all(|m| m.matches(record)),
            Self::One(m) => m.matches(record),
        }
    }

    #[cfg(test)]
    fn matchers(&self) -> Vec<&Matcher> {
        match self {
            Self::All { all } => all.iter().collect(),
            Self::One(m) => vec![m],
        }
    }
}

impl Matchers {
    fn matches(&self, record: &Json) -> bool {
        match self {
            Self::One(c) => c.matches(record),
            Self::Any(cs) => cs.iter().any(|c| c.matches(record)),
        }
    }

    #[cfg(test)]
    fn matchers(&self) -> Vec<&Matcher> {
        match self {
            Self::One(c) => c.matchers(),
            Self::Any(cs) => cs.iter().flat_map(Clause::matchers).collect(),
        }
    }
}

/// One test on the value at `path`: equal to a text, one of several, containing or
/// starting with one, or (not) present.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Matcher {
    path: String,
    #[serde(default)]
    equals: Option<String>,
    #[serde(default)]
    one_of: Option<Vec<String>>,
    #[serde(default)]
    contains: Option<String>,
    #[serde(default)]
    prefix: Option<String>,
    #[serde(default)]
    exists: Option<bool>,
}

impl Matcher {
    /// How many tests it sets (a mapping's matchers set exactly one).
    #[cfg(test)]
    fn tests(&self) -> usize {
        usize::from(self.equals.is_some())
            + usize::from(self.one_of.is_some())
            + usize::from(self.contains.is_some())
            + usize::from(self.prefix.is_some())
            + usize::from(self.exists.is_some())
    }

    fn matches(&self, record: &Json) -> bool {
        let v = present(at(record, &self.path));
        if let Some(eq) = &self.equals {
            v.and_then(scalar_text).is_some_and(|s| &s == eq)
        } else if let Some(any) = &self.one_of {
            v.and_then(scalar_text).is_some_and(|s| any.contains(&s))
        } else if let Some(sub) = &self.contains {
            v.and_then(Json::as_str).is_some_and(|s| s.contains(sub.as_str()))
        } else if let Some(start) = &self.prefix {
            v.and_then(Json::as_str).is_some_and(|s| s.starts_with(start.as_str()))
        } else if let Some(want) = self.exists {
            v.is_some() == want
        } else {
            false
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum FieldSpec {
    Path(String),
    Convert {
        path: String,
        #[serde(rename = "as")]
        conversion: Conversion,
    },
    Join {
        join: Vec<String>,
    },
    Ref {
        #[serde(rename = "ref")]
        to: String,
        path: String,
    },
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Conversion {
    String,
    Integer,
    Number,
    Boolean,
    /// A date or timestamp (RFC 3339 text or Unix seconds) as RFC 3339 text.
    Date,
    /// An amount in cents as a number of currency units.
    Cents,
    /// A boolean, negated (`cancel_at_period_end` → `auto_renew`).
    Not,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RelSpec {
    kind: String,
    to: String,
    path: String,
}

/// A record in canonical form.
#[derive(Debug, Clone, PartialEq)]
pub struct Normalized {
    pub entity_type: EntityType,
    pub id: Id,
    pub attributes: Attributes,
    /// When the source last changed the record.
    pub source_updated_at: Timestamp,
    /// `(kind, target type, target id)`.
    pub relationships: Vec<(EntityType, EntityType, Id)>,
    /// Canonical field → signal kind.
    pub signals: BTreeMap<String, EntityType>,
}

fn document() -> &'static Document {
    static DOC: OnceLock<Document> = OnceLock::new();
    DOC.get_or_init(|| match serde_json::from_str(MAPPINGS) {
        Ok(d) => d,
        // The file is compiled in and checked by a unit test; this cannot happen in a
        // build that passed its tests.
        Err(e) => panic!("mappings.json is invalid: {e}"),
    })
}

/// The sources with a mapping, in name order.
pub fn sources() -> Vec<(&'static str, &'static str)> {
    document().sources.iter().map(|(k, v)| (k.as_str(), v.title.as_str())).collect()
}

/// The mapping of `source`, if it has one.
pub fn mapping(source: &str) -> Option<&'static SourceMapping> {
    document().sources.get(source)
}

fn at<'a>(v: &'a Json, path: &str) -> Option<&'a Json> {
    path.split('.').try_fold(v, |cur, seg| match cur {
        Json::Object(m) => m.get(seg),
        Json::Array(a) => seg.parse::<usize>().ok().and_then(|i| a.get(i)),
        _ => None,
    })
}

fn present(v: Option<&Json>) -> Option<&Json> {
    v.filter(|j| !j.is_null())
}

fn scalar_text(v: &Json) -> Option<String> {
    match v {
        Json::String(s) => Some(s.clone()),
        Json::Number(n) => Some(n.to_string()),
        Json::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// The canonical id of the source's `native` id for `entity_type`: the same on every
/// delivery, different per source, and naming neither the source nor its id format.
pub fn canonical_id(source: &str, entity_type: &str, native: &str) -> Id {
    let digest = Sha256::digest(format!("{source}\u{0}{entity_type}\u{0}{native}").as_bytes());
    let short = hex::encode(&digest[..10]);
    // 20 hex characters and a type prefix: always a valid id.
    Id::new(format!("{entity_type}-{short}")).unwrap_or_else(|_| Id::new(short).unwrap_or_else(|_| unreachable!()))
}

/// How far ahead of our clock a source's modification time may be (its clock's skew).
pub const MAX_SOURCE_CLOCK_SKEW_MS: i64 = 5 * 60 * 1000;

/// Parses a source timestamp: RFC 3339 (also with a `+0000` offset, as Salesforce and
/// Jira write it) or Unix seconds / milliseconds.
pub fn parse_time(v: &Json) -> Option<Timestamp> {
    match v {
        Json::Number(n) => {
            let n = n.as_i64()?;
            // Beyond year 5138 in seconds is milliseconds.
            Some(Timestamp(if n > 100_000_000_000 { n } else { n.checked_mul(1000)? }))
        }
        Json::String(s) => {
            let fixed = fix_offset(s);
            let t = time::OffsetDateTime::parse(&fixed, &time::format_description::well_known::Rfc3339).ok()?;
            i64::try_from(t.unix_timestamp_nanos() / 1_000_000).ok().map(Timestamp)
        }
        _ => None,
    }
}

/// `…+0000` → `…+00:00`.
fn fix_offset(s: &str) -> String {
    let b = s.as_bytes();
    if b.len() > 5 && matches!(b[b.len() - 5], b'+' | b'-') && b[b.len() - 4..].iter().all(u8::is_ascii_digit) {
        format!("{}:{}", &s[..s.len() - 2], &s[s.len() - 2..])
    } else {
        s.to_owned()
    }
}

fn convert(v: &Json, c: Conversion, field: &str) -> Result<Value> {
    let bad = |what: &str| Error::invalid_field(field, format!("expected {what}"));
    Ok(match c {
        Conversion::String => Value::Text(scalar_text(v).ok_or_else(|| bad("a scalar"))?),
        Conversion::Integer => match v {
            Json::Number(n) if n.as_i64().is_some() => Value::Int(n.as_i64().unwrap_or_default()),
            Json::String(s) => Value::Int(s.trim().parse().map_err(|_| bad("an integer"))?),
            _ => return Err(bad("an integer")),
        },
        Conversion::Number => match v {
            Json::Number(n) => Value::Float(n.as_f64().ok_or_else(|| bad("a number"))?),
            Json::String(s) => Value::Float(s.trim().parse().map_err(|_| bad("a number"))?),
            _ => return Err(bad("a number")),
        },
        Conversion::Boolean | Conversion::Not => {
            let b = match v {
                Json::Bool(b) => *b,
                Json::String(s) if s == "true" || s == "false" => s == "true",
                _ => return Err(bad("a boolean")),
            };
            Value::Bool(if matches!(c, Conversion::Not) { !b } else { b })
        }
        Conversion::Date => Value::Text(parse_time(v).ok_or_else(|| bad("a date"))?.to_rfc3339()),
        Conversion::Cents => match v {
            #[allow(clippy::cast_precision_loss)]
            Json::Number(n) if n.as_i64().is_some() => Value::Float(n.as_i64().unwrap_or_default() as f64 / 100.0),
            _ => return Err(bad("an amount in cents")),
        },
    })
}

fn to_value(v: &Json, field: &str) -> Result<Value> {
    serde_json::from_value(v.clone()).map_err(|_| Error::invalid_field(field, "not a storable value"))
}

impl SourceMapping {
    fn object_for(&self, record: &Json) -> Option<&ObjectMapping> {
        self.objects.iter().find(|o| o.matcher.matches(record))
    }

    /// Checks that `record` is something this source's mapping recognises: an object of
    /// a known kind with an id and a modification time no later than `latest` (now plus
    /// the clock skew a source may have: a record dated in the future would win every
    /// freshness comparison for ever). This is the ingest API's shape check; the
    /// normalizer does the rest in the pipeline.
    ///
    /// # Errors
    /// `INVALID_REQUEST` saying what is wrong with the record.
    pub fn check_shape(&self, source: &str, record: &Json, latest: Timestamp) -> Result<()> {
        if !record.is_object() {
            return Err(Error::invalid("a record must be a JSON object"));
        }
        let o = self
            .object_for(record)
            .ok_or_else(|| Error::invalid(format!("not a record kind the {source} mapping knows ({})", self.title)))?;
        // (The ingest service tells these rejections from failures by their first words.)
        let object = match &o.unwrap {
            Some(p) => at(record, p).ok_or_else(|| Error::invalid_field(p, "missing"))?,
            None => record,
        };
        present(at(object, &o.id))
            .and_then(scalar_text)
            .ok_or_else(|| Error::invalid_field(&o.id, "the record's id is missing"))?;
        let updated = present(at(record, &o.updated_at))
            .and_then(parse_time)
            .ok_or_else(|| Error::invalid_field(&o.updated_at, "the record's modification time is missing or not a time"))?;
        if updated > latest {
            return Err(Error::invalid_field(
                &o.updated_at,
                format!(
                    "the record's modification time {} is in the future (a source's clock may be at most {} s ahead)",
                    updated.to_rfc3339(),
                    MAX_SOURCE_CLOCK_SKEW_MS / 1000
                ),
            ));
        }
        Ok(())
    }

    /// Normalizes one record.
    ///
    /// # Errors
    /// `INVALID_REQUEST` naming the canonical field or source path at fault.
    pub fn normalize(&self, source: &str, record: &Json) -> Result<Normalized> {
        // Its time was bounded when the ingest API accepted it.
        self.check_shape(source, record, Timestamp(i64::MAX))?;
        let o = self.object_for(record).ok_or_else(|| Error::invalid("unknown record kind"))?;
        let object = o.unwrap.as_deref().and_then(|p| at(record, p)).unwrap_or(record);
        let native = present(at(object, &o.id)).and_then(scalar_text).unwrap_or_default();
        let source_updated_at = present(at(record, &o.updated_at)).and_then(parse_time).unwrap_or(Timestamp(0));
        let mut attributes = Attributes::new();
        for (field, spec) in &o.fields {
            let value = match spec {
                FieldSpec::Path(p) => present(at(object, p)).map(|v| to_value(v, field)).transpose()?,
                FieldSpec::Convert { path, conversion } => {
                    present(at(object, path)).map(|v| convert(v, *conversion, field)).transpose()?
                }
                FieldSpec::Join { join } => {
                    let parts: Vec<String> = join.iter().filter_map(|p| present(at(object, p)).and_then(scalar_text)).collect();
                    let text = parts.join(" ").trim().to_owned();
                    (!text.is_empty()).then_some(Value::Text(text))
                }
                FieldSpec::Ref { to, path } => {
                    present(at(object, path)).and_then(scalar_text).map(|n| Value::Text(canonical_id(source, to, &n).to_string()))
                }
            };
            if let Some(v) = value {
                attributes.insert(field.clone(), v);
            }
        }
        let mut relationships = Vec::new();
        for r in &o.relationships {
            if let Some(n) = present(at(object, &r.path)).and_then(scalar_text) {
                relationships.push((EntityType::new(&r.kind)?, EntityType::new(&r.to)?, canonical_id(source, &r.to, &n)));
            }
        }
        let signals = o.signals.iter().map(|(f, k)| Ok((f.clone(), EntityType::new(k)?))).collect::<Result<BTreeMap<_, _>>>()?;
        Ok(Normalized {
            entity_type: EntityType::new(&o.entity_type)?,
            id: canonical_id(source, &o.entity_type, &native),
            attributes,
            source_updated_at,
            relationships,
            signals,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Salesforce records are recognised by `attributes.type` when they carry it, and by
    /// the id's key prefix only when they do not: a row of another object that carries a
    /// mapped record's id (`RecentlyViewed`) is not taken for that record.
    #[test]
    fn salesforce_shapes_are_told_apart() {
        let sf = mapping("salesforce").unwrap();
        let kind = |r: Json| sf.object_for(&r).map(|o| o.entity_type.clone());
        assert_eq!(kind(json!({"attributes": {"type": "Account"}, "Id": "001A"})).as_deref(), Some("account"));
        assert_eq!(kind(json!({"Id": "001A"})).as_deref(), Some("account"));
        assert_eq!(kind(json!({"Id": "003A"})).as_deref(), Some("contact"));
        assert_eq!(kind(json!({"Id": "500A"})).as_deref(), Some("ticket"));
        assert_eq!(kind(json!({"attributes": {"type": "RecentlyViewed"}, "Id": "001A"})), None);
        assert_eq!(kind(json!({"Id": "006A"})), None, "an opportunity is not mapped");
        let hs = mapping("hubspot").unwrap();
        for t in ["companies", "company", "0-2"] {
            assert_eq!(hs.object_for(&json!({"objectType": t})).map(|o| o.entity_type.as_str()), Some("account"), "{t}");
        }
        for t in ["contacts", "contact", "0-1"] {
            assert_eq!(hs.object_for(&json!({"objectType": t})).map(|o| o.entity_type.as_str()), Some("contact"), "{t}");
        }
    }

    #[test]
    fn the_mappings_parse_and_name_only_canonical_types_and_fields() {
        // Each type in the schema of a department that keeps it (deals are sales').
        let schemas: Vec<_> = domain::tenant::Department::ALL
            .iter()
            .map(|d| adk::resolve::schema_for(*d, domain::tenant::Industry::Saas))
            .collect();
        assert!(sources().len() >= 5);
        for (name, _) in sources() {
            for o in &mapping(name).unwrap().objects {
                for m in o.matcher.matchers() {
                    assert_eq!(m.tests(), 1, "{name} → {}: a matcher on {} sets one test", o.entity_type, m.path);
                }
                let attrs: Attributes = o.fields.keys().map(|k| (k.clone(), Value::Text("x".into()))).collect();
                let e = schemas
                    .iter()
                    .find(|s| s.entity_types.contains_key(&o.entity_type))
                    .map(|s| s.check_write(&o.entity_type, &attrs));
                assert!(matches!(e, Some(Ok(()))), "{name} → {}: {e:?}", o.entity_type);
                for f in o.signals.keys() {
                    assert!(o.fields.contains_key(f), "{name}: a signal on an unmapped field {f}");
                }
            }
        }
    }

    #[test]
    fn times_parse_in_every_source_format() {
        assert_eq!(parse_time(&json!("1970-01-01T00:00:01Z")), Some(Timestamp(1000)));
        assert_eq!(parse_time(&json!("1970-01-01T00:00:01.500+0000")), Some(Timestamp(1500)));
        assert_eq!(parse_time(&json!("1970-01-01T01:00:01+01:00")), Some(Timestamp(1000)));
        assert_eq!(parse_time(&json!(2)), Some(Timestamp(2000)));
        assert_eq!(parse_time(&json!(1_700_000_000_123_i64)), Some(Timestamp(1_700_000_000_123)));
        assert_eq!(parse_time(&json!("yesterday")), None);
        assert_eq!(parse_time(&json!(null)), None);
    }

    #[test]
    fn a_stripe_subscription_event_normalizes_to_canonical_fields() {
        let m = mapping("stripe").unwrap();
        let rec = json!({"id": "evt_1", "type": "customer.subscription.updated", "created": 1_764_000_000,
            "data": {"object": {"id": "sub_9", "object": "subscription", "customer": "cus_1", "status": "active",
            "quantity": 12, "start_date": 1_760_000_000, "current_period_end": 1_767_000_000, "cancel_at_period_end": false,
            "items": {"data": [{"price": {"nickname": "Growth", "unit_amount": 49_900, "recurring": {"interval": "month"}}}]}}}});
        let n = m.normalize("stripe", &rec).unwrap();
        assert_eq!(n.entity_type.as_str(), "subscription");
        assert_eq!(n.id, canonical_id("stripe", "subscription", "sub_9"));
        assert_eq!(n.attributes["plan_name"], Value::Text("Growth".into()));
        assert_eq!(n.attributes["mrr"], Value::Float(499.0));
        assert_eq!(n.attributes["seats"], Value::Int(12));
        assert_eq!(n.attributes["auto_renew"], Value::Bool(true));
        assert_eq!(n.attributes["account_id"], Value::Text(canonical_id("stripe", "account", "cus_1").to_string()));
        assert_eq!(n.source_updated_at, Timestamp(1_764_000_000_000));
        assert_eq!(n.relationships.len(), 1);
        assert!(!n.id.as_str().contains("stripe") && !n.id.as_str().contains("sub_"));
    }

    #[test]
    fn shapes_are_checked_with_clear_errors() {
        let m = mapping("jira").unwrap();
        let latest = Timestamp(i64::MAX);
        assert!(m.check_shape("jira", &json!([1]), latest).unwrap_err().message.contains("JSON object"));
        assert!(m.check_shape("jira", &json!({"key": "X-1"}), latest).unwrap_err().message.contains("not a record kind"));
        let no_time = json!({"id": "1", "key": "X-1", "fields": {"issuetype": {"name": "Bug"}, "summary": "s"}});
        assert!(m.check_shape("jira", &no_time, latest).is_err());
        let ok = json!({"id": "1", "key": "X-1", "fields": {"issuetype": {"name": "Bug"}, "summary": "s", "updated": "2026-01-01T00:00:00.000+0000"}});
        m.check_shape("jira", &ok, latest).unwrap();
        // Dated beyond the allowed skew: refused, naming the field.
        let e = m.check_shape("jira", &ok, Timestamp(0)).unwrap_err();
        assert!(e.message.contains("in the future"), "{}", e.message);
        let bad_int = json!({"objectType": "companies", "id": "1", "updatedAt": "2026-01-01T00:00:00Z", "properties": {"name": "A", "numberofemployees": "many"}});
        let e = mapping("hubspot").unwrap().normalize("hubspot", &bad_int).unwrap_err();
        assert_eq!(e.payload.field_errors.first().map(|f| f.field.as_str()), Some("employee_count"), "{e:?}");
    }
}
