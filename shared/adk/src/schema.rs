//! The canonical Spine schema (SPEC §4.1) as data, and its resolution per tenant.
//!
//! `schema/canonical.json` (format in `schema/README.md`) holds every canonical entity
//! type once, each department's base set of types and each industry's overlay (types
//! added and removed per department or for all departments, and per-type overrides).
//! [`resolve_schema`] applies the department config **and** the industry overlay, so a
//! healthcare customer-success tenant is validated against patients and providers, never
//! against the SaaS customer-success schema.
//!
//! The schema is the field policy of SPEC §5.2 step 4 for `spine.entity.*`:
//! [`TenantSchema::require_type`] refuses a type outside the tenant's schema,
//! [`TenantSchema::strip_for_read`] keeps only `priority_fields`, and
//! [`TenantSchema::check_write`] rejects unknown fields and missing required ones.
//!
//! Pure: the document is embedded at compile time and parsed once into an immutable
//! static (a lazily built constant). No I/O, no mutable state.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;

use domain::spine::PoleClass;
use domain::tenant::{Department, Industry};
use domain::value::{Attributes, Value};
use domain::{Error, FieldError};
use serde::{Deserialize, Serialize};

/// The canonical schema document, embedded at build time.
const CANONICAL_JSON: &str = include_str!("../schema/canonical.json");

/// The key of an industry's `add`/`remove` entries that apply to every department.
const ALL_DEPARTMENTS: &str = "*";

/// Longest entity-type name echoed back in an error message.
const MAX_ECHOED_NAME: usize = 64;

/// The kind of value a field holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FieldKind {
    String,
    Text,
    Number,
    Integer,
    Boolean,
    Date,
    Datetime,
    Money,
    Enum,
    Reference,
    List,
    Object,
}

/// A relationship kind an entity type may have, and the type it points to.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RelationshipSpec {
    pub kind: String,
    pub to: String,
}

/// One entity type as a tenant sees it (industry overrides already merged in).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EntityTypeSpec {
    pub name: String,
    pub pole_class: PoleClass,
    pub description: String,
    /// Every field a write may carry.
    pub fields: BTreeMap<String, FieldKind>,
    /// The fields agents may see (the "traits"); reads strip everything else.
    pub priority_fields: BTreeSet<String>,
    /// Fields a write must carry (non-null).
    pub required: BTreeSet<String>,
    pub relationships: Vec<RelationshipSpec>,
}

/// The Spine schema of one department × industry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TenantSchema {
    pub department: Department,
    pub industry: Industry,
    pub entity_types: BTreeMap<String, EntityTypeSpec>,
}

/// Resolves the schema of a department × industry: the department's base types, minus
/// the industry's removals (`"*"` and the department's own), plus its additions (`"*"`
/// and the department's own; an addition wins over a removal), with the industry's
/// per-type overrides merged in. Relationships whose target is not in the result are
/// dropped, so the schema never points outside itself.
pub fn resolve_schema(department: Department, industry: Industry) -> TenantSchema {
    let canonical = canonical();
    let keys = [ALL_DEPARTMENTS, department.as_str()];
    let mut names: BTreeSet<&str> =
        canonical.departments.get(&department).map(|d| d.entity_types.iter().map(String::as_str).collect()).unwrap_or_default();
    let overlay = canonical.industries.get(&industry);
    if let Some(overlay) = overlay {
        for removed in keys.iter().filter_map(|k| overlay.remove.get(*k)).flatten() {
            names.remove(removed.as_str());
        }
        names.extend(keys.iter().filter_map(|k| overlay.add.get(*k)).flatten().map(String::as_str));
    }
    let mut entity_types = BTreeMap::new();
    for name in &names {
        let Some(base) = canonical.types.get(*name) else { continue };
        let mut spec = base.clone();
        if let Some(patch) = overlay.and_then(|o| o.overrides.get(*name)) {
            patch.apply_to(&mut spec);
        }
        spec.relationships.retain(|r| names.contains(r.to.as_str()));
        entity_types.insert(spec.name.clone(), spec);
    }
    TenantSchema { department, industry, entity_types }
}

/// Every canonical entity type, whichever department and industry use it.
pub fn all_entity_type_names() -> BTreeSet<String> {
    canonical().types.keys().cloned().collect()
}

impl TenantSchema {
    pub fn entity_type(&self, name: &str) -> Option<&EntityTypeSpec> {
        self.entity_types.get(name)
    }

    /// The entity type, if it belongs to this tenant's schema.
    ///
    /// # Errors
    /// `INVALID_REQUEST` on the field `type` when it does not, listing the types that do.
    pub fn require_type(&self, name: &str) -> Result<&EntityTypeSpec, Error> {
        self.entity_types.get(name).ok_or_else(|| {
            let shown: String = name.chars().take(MAX_ECHOED_NAME).collect();
            let ellipsis = if shown.len() < name.len() { "…" } else { "" };
            let known = self.entity_types.keys().map(String::as_str).collect::<Vec<_>>().join(", ");
            Error::invalid_field(
                "type",
                format!(
                    "{shown:?}{ellipsis} is not an entity type of the {} × {} schema; its types are: {known}",
                    self.department, self.industry
                ),
            )
        })
    }

    /// Reads: only the priority fields of `attrs` (everything else is stripped).
    ///
    /// # Errors
    /// `INVALID_REQUEST` when `entity_type` is not in this schema.
    pub fn strip_for_read(&self, entity_type: &str, attrs: &Attributes) -> Result<Attributes, Error> {
        let spec = self.require_type(entity_type)?;
        Ok(attrs.iter().filter(|(name, _)| spec.priority_fields.contains(*name)).map(|(k, v)| (k.clone(), v.clone())).collect())
    }

    /// Writes: checks `attrs` against the entity type, rejecting the whole write when any
    /// field is unknown or any required field is missing (absent or null). A pure check:
    /// nothing is stored or changed, and nothing is accepted partially.
    ///
    /// # Errors
    /// `INVALID_REQUEST` when `entity_type` is not in this schema, or naming every
    /// unknown and every missing field (in the message and one
    /// [`FieldError`] each, as `attributes.<name>`).
    pub fn check_write(&self, entity_type: &str, attrs: &Attributes) -> Result<(), Error> {
        let spec = self.require_type(entity_type)?;
        let unknown: Vec<&str> = attrs.keys().map(String::as_str).filter(|name| !spec.fields.contains_key(*name)).collect();
        let missing: Vec<&str> = spec
            .required
            .iter()
            .map(String::as_str)
            .filter(|name| attrs.get(*name).is_none_or(|v| matches!(v, Value::Null)))
            .collect();
        if unknown.is_empty() && missing.is_empty() {
            return Ok(());
        }
        let (department, industry) = (self.department, self.industry);
        let mut problems = Vec::new();
        if !unknown.is_empty() {
            let allowed = spec.fields.keys().map(String::as_str).collect::<Vec<_>>().join(", ");
            problems.push(format!("unknown fields: {} (its fields are: {allowed})", unknown.join(", ")));
        }
        if !missing.is_empty() {
            problems.push(format!("missing required fields: {}", missing.join(", ")));
        }
        let mut error = Error::invalid(format!("{entity_type} in the {department} × {industry} schema: {}", problems.join("; ")));
        error.payload.field_errors = unknown
            .iter()
            .map(|name| FieldError {
                field: format!("attributes.{name}"),
                message: format!("unknown field: {entity_type} in the {department} × {industry} schema has no field {name}"),
            })
            .chain(missing.iter().map(|name| FieldError {
                field: format!("attributes.{name}"),
                message: format!("required field of {entity_type} is missing"),
            }))
            .collect();
        Err(error)
    }
}

// ------------------------------------------------------------------ the document

/// `canonical.json` as written (see `schema/README.md`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Document {
    version: u32,
    entity_types: BTreeMap<String, RawEntityType>,
    departments: BTreeMap<Department, RawDepartment>,
    industries: BTreeMap<Industry, RawIndustry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEntityType {
    pole_class: PoleClass,
    description: String,
    fields: BTreeMap<String, FieldKind>,
    priority_fields: Vec<String>,
    #[serde(default)]
    required: Vec<String>,
    #[serde(default)]
    relationships: Vec<RelationshipSpec>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDepartment {
    #[allow(dead_code)] // documentation of the data; read by the tests only
    description: String,
    entity_types: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawIndustry {
    #[allow(dead_code)] // documentation of the data; read by the tests only
    description: String,
    /// Types added, keyed by department name or `"*"`.
    #[serde(default)]
    add: BTreeMap<String, Vec<String>>,
    /// Types removed, keyed by department name or `"*"`.
    #[serde(default)]
    remove: BTreeMap<String, Vec<String>>,
    /// Per-type changes, applied wherever the type is in the resolved schema.
    #[serde(default)]
    overrides: BTreeMap<String, Override>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Override {
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    add_fields: BTreeMap<String, FieldKind>,
    #[serde(default)]
    add_priority_fields: Vec<String>,
    #[serde(default)]
    add_required: Vec<String>,
    #[serde(default)]
    add_relationships: Vec<RelationshipSpec>,
}

impl Override {
    fn apply_to(&self, spec: &mut EntityTypeSpec) {
        if let Some(description) = &self.description {
            spec.description.clone_from(description);
        }
        spec.fields.extend(self.add_fields.iter().map(|(k, v)| (k.clone(), *v)));
        spec.priority_fields.extend(self.add_priority_fields.iter().cloned());
        spec.required.extend(self.add_required.iter().cloned());
        for relationship in &self.add_relationships {
            if !spec.relationships.contains(relationship) {
                spec.relationships.push(relationship.clone());
            }
        }
    }
}

/// The parsed document with its entity types built once.
#[derive(Debug)]
struct Canonical {
    types: BTreeMap<String, EntityTypeSpec>,
    departments: BTreeMap<Department, RawDepartment>,
    industries: BTreeMap<Industry, RawIndustry>,
}

fn parse(json: &str) -> Result<Document, String> {
    serde_json::from_str(json).map_err(|e| e.to_string())
}

fn build(document: Document) -> Canonical {
    let types = document
        .entity_types
        .into_iter()
        .map(|(name, raw)| {
            let spec = EntityTypeSpec {
                name: name.clone(),
                pole_class: raw.pole_class,
                description: raw.description,
                fields: raw.fields,
                priority_fields: raw.priority_fields.into_iter().collect(),
                required: raw.required.into_iter().collect(),
                relationships: raw.relationships,
            };
            (name, spec)
        })
        .collect();
    Canonical { types, departments: document.departments, industries: document.industries }
}

fn canonical() -> &'static Canonical {
    static CANONICAL: OnceLock<Canonical> = OnceLock::new();
    CANONICAL.get_or_init(|| {
        // The document is build-time data, embedded in the binary; the unit test
        // `tests::canonical_document_is_valid` proves it parses and holds every invariant.
        // So a panic here can only follow an edit that already failed the tests: it is
        // a build defect, reported loudly, never a runtime condition to recover from.
        let document = parse(CANONICAL_JSON).unwrap_or_else(|e| panic!("shared/adk/schema/canonical.json does not parse: {e}"));
        let problems = integrity_problems(&document);
        if !problems.is_empty() {
            panic!("shared/adk/schema/canonical.json is inconsistent:\n{}", problems.join("\n"));
        }
        build(document)
    })
}

/// Structural invariants resolution relies on: names resolve, subsets hold, keys are valid.
fn integrity_problems(document: &Document) -> Vec<String> {
    let mut problems = Vec::new();
    let is_type = |name: &str| document.entity_types.contains_key(name);
    if document.version != 1 {
        problems.push(format!("unsupported version {}", document.version));
    }
    for (name, raw) in &document.entity_types {
        let valid_name = !name.is_empty() && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if !valid_name {
            problems.push(format!("entity type {name:?}: names are lowercase snake_case"));
        }
        for (list, what) in [(&raw.priority_fields, "priority field"), (&raw.required, "required field")] {
            let distinct: BTreeSet<&String> = list.iter().collect();
            if distinct.len() != list.len() {
                problems.push(format!("{name}: a {what} is listed twice"));
            }
            for field in list.iter().filter(|f| !raw.fields.contains_key(*f)) {
                problems.push(format!("{name}: {what} {field} is not a field"));
            }
        }
        for relationship in raw.relationships.iter().filter(|r| !is_type(&r.to)) {
            problems.push(format!("{name}: relationship {} points to unknown type {}", relationship.kind, relationship.to));
        }
    }
    for (department, raw) in &document.departments {
        let distinct: BTreeSet<&String> = raw.entity_types.iter().collect();
        if distinct.len() != raw.entity_types.len() {
            problems.push(format!("department {department}: a type is listed twice"));
        }
        for name in raw.entity_types.iter().filter(|n| !is_type(n)) {
            problems.push(format!("department {department}: unknown type {name}"));
        }
    }
    for (industry, raw) in &document.industries {
        for (verb, entries) in [("add", &raw.add), ("remove", &raw.remove)] {
            for (key, names) in entries {
                if key != ALL_DEPARTMENTS && Department::parse(key).is_err() {
                    problems.push(format!("industry {industry}: {verb} key {key:?} is neither \"*\" nor a department"));
                }
                for name in names.iter().filter(|n| !is_type(n)) {
                    problems.push(format!("industry {industry}: {verb}[{key}] names unknown type {name}"));
                }
            }
        }
        for (name, patch) in &raw.overrides {
            let Some(base) = document.entity_types.get(name) else {
                problems.push(format!("industry {industry}: override of unknown type {name}"));
                continue;
            };
            for field in patch.add_fields.keys().filter(|f| base.fields.contains_key(*f)) {
                problems.push(format!("industry {industry}: override of {name} redefines field {field}"));
            }
            let is_field = |f: &String| base.fields.contains_key(f) || patch.add_fields.contains_key(f);
            for field in patch.add_priority_fields.iter().chain(&patch.add_required).filter(|f| !is_field(f)) {
                problems.push(format!("industry {industry}: override of {name} names unknown field {field}"));
            }
            for relationship in patch.add_relationships.iter().filter(|r| !is_type(&r.to)) {
                problems.push(format!("industry {industry}: override of {name} relates to unknown type {}", relationship.to));
            }
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use domain::ErrorCode;

    use super::*;

    fn attrs(pairs: &[(&str, Value)]) -> Attributes {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), v.clone())).collect()
    }

    fn names(schema: &TenantSchema) -> BTreeSet<&str> {
        schema.entity_types.keys().map(String::as_str).collect()
    }

    fn every_schema() -> impl Iterator<Item = TenantSchema> {
        Department::ALL.iter().flat_map(|d| Industry::ALL.iter().map(move |i| resolve_schema(*d, *i)))
    }

    /// Resolution without the industry overlay: the department's base types as they are.
    fn department_base(department: Department) -> BTreeSet<String> {
        canonical().departments.get(&department).map(|d| d.entity_types.iter().cloned().collect()).unwrap_or_default()
    }

    fn assert_has(schema: &TenantSchema, types: &[&str]) {
        for ty in types {
            assert!(
                schema.require_type(ty).is_ok(),
                "{} × {} should have {ty}; it has {:?}",
                schema.department,
                schema.industry,
                names(schema)
            );
        }
    }

    fn assert_rejects(schema: &TenantSchema, types: &[&str]) {
        for ty in types {
            let err = schema.require_type(ty).err().unwrap_or_else(|| {
                panic!("{} × {} must not have {ty}", schema.department, schema.industry);
            });
            assert_eq!(err.code, ErrorCode::InvalidRequest);
            assert_eq!(err.payload.field_errors.len(), 1);
            assert_eq!(err.payload.field_errors[0].field, "type");
            assert!(err.message.contains(&format!("{} × {}", schema.department, schema.industry)), "{}", err.message);
            assert!(schema.entity_type(ty).is_none());
        }
    }

    fn assert_priority(schema: &TenantSchema, ty: &str, fields: &[&str]) {
        let spec = schema.require_type(ty).unwrap();
        for field in fields {
            assert!(spec.priority_fields.contains(*field), "{ty}.{field} should be a priority field of {}", schema.industry);
        }
    }

    // ------------------------------------------------------------ the data itself

    #[test]
    fn canonical_document_is_valid() {
        let document = parse(CANONICAL_JSON).unwrap();
        let problems = integrity_problems(&document);
        assert!(problems.is_empty(), "{}", problems.join("\n"));
        assert!(document.entity_types.len() >= 130, "only {} entity types", document.entity_types.len());
        assert_eq!(document.departments.keys().copied().collect::<Vec<_>>(), {
            let mut all = Department::ALL.to_vec();
            all.sort();
            all
        });
        assert_eq!(document.industries.keys().copied().collect::<Vec<_>>(), {
            let mut all = Industry::ALL.to_vec();
            all.sort();
            all
        });
        for (name, raw) in &document.entity_types {
            assert!(!raw.description.trim().is_empty(), "{name} has no description");
            assert!(!raw.priority_fields.is_empty(), "{name} has no priority field");
            assert!(
                raw.priority_fields.len() < raw.fields.len(),
                "{name}: every field is a priority field; reads would strip nothing"
            );
            for field in &raw.required {
                assert!(raw.priority_fields.contains(field), "{name}: required field {field} is not a priority field");
            }
        }
        for (department, raw) in &document.departments {
            assert!(!raw.description.trim().is_empty(), "{department} has no description");
            assert!(raw.entity_types.len() >= 8, "{department} has only {} types", raw.entity_types.len());
        }
        for (industry, raw) in &document.industries {
            assert!(!raw.description.trim().is_empty(), "{industry} has no description");
            // Every add and every remove does something for at least one department it names.
            let departments_of = |key: &str| -> Vec<Department> {
                if key == ALL_DEPARTMENTS { Department::ALL.to_vec() } else { Department::parse(key).into_iter().collect() }
            };
            for (key, types) in &raw.add {
                for ty in types {
                    assert!(
                        departments_of(key).iter().any(|d| !department_base(*d).contains(ty)),
                        "{industry}: add[{key}] {ty} is already in every base it applies to"
                    );
                }
            }
            for (key, types) in &raw.remove {
                for ty in types {
                    assert!(
                        departments_of(key).iter().any(|d| department_base(*d).contains(ty)),
                        "{industry}: remove[{key}] {ty} is in no base it applies to"
                    );
                }
            }
        }
    }

    #[test]
    fn the_integrity_check_catches_broken_documents() {
        let broken = r#"{
            "version": 1,
            "entity_types": {
                "a": {"pole_class": "object", "description": "A.", "fields": {"x": "string"},
                      "priority_fields": ["x", "y"], "required": ["z"], "relationships": [{"kind": "k", "to": "nowhere"}]}
            },
            "departments": {"sales": {"description": "S.", "entity_types": ["a", "ghost"]}},
            "industries": {"retail": {"description": "R.", "add": {"salez": ["a"]}, "remove": {"*": ["phantom"]},
                           "overrides": {"a": {"add_fields": {"x": "text"}, "add_priority_fields": ["w"]}, "b": {}}}}
        }"#;
        let problems = integrity_problems(&parse(broken).unwrap()).join("\n");
        for expected in [
            "priority field y",
            "required field z",
            "unknown type nowhere",
            "unknown type ghost",
            "\"salez\"",
            "unknown type phantom",
            "redefines field x",
            "unknown field w",
            "unknown type b",
        ] {
            assert!(problems.contains(expected), "missing {expected:?} in:\n{problems}");
        }
        // Unknown keys and kinds do not even parse.
        assert!(parse(&broken.replace("\"string\"", "\"strin\"")).is_err());
        assert!(parse(&broken.replace("\"priority_fields\"", "\"priority\"")).is_err());
        assert!(parse(&broken.replace("\"retail\"", "\"retial\"")).is_err());
    }

    #[test]
    fn counts_are_as_specified() {
        assert!(all_entity_type_names().len() >= 130);
        assert_eq!(canonical().departments.len(), 12);
        assert_eq!(canonical().industries.len(), 11);
        for department in Department::ALL {
            for industry in Industry::ALL {
                let schema = resolve_schema(*department, *industry);
                assert!(schema.entity_types.len() >= 8, "{department} × {industry}: {}", schema.entity_types.len());
            }
        }
    }

    #[test]
    fn every_type_is_reachable_from_some_department_and_industry() {
        let reached: BTreeSet<String> = every_schema().flat_map(|s| s.entity_types.into_keys()).collect();
        let unreached: Vec<_> = all_entity_type_names().difference(&reached).cloned().collect();
        assert!(unreached.is_empty(), "never in any tenant schema: {unreached:?}");
    }

    #[test]
    fn every_overlay_changes_something() {
        for industry in Industry::ALL {
            let changed = Department::ALL.iter().filter(|d| {
                let resolved: BTreeSet<String> = resolve_schema(**d, *industry).entity_types.into_keys().collect();
                resolved != department_base(**d)
            });
            assert!(changed.count() >= 1, "the {industry} overlay changes no department's types");
            let overlay = &canonical().industries[industry];
            assert!(!overlay.overrides.is_empty(), "the {industry} overlay overrides no type");
        }
    }

    #[test]
    fn every_resolved_schema_is_consistent() {
        for schema in every_schema() {
            let here = names(&schema);
            for (name, spec) in &schema.entity_types {
                let context = format!("{} × {}: {name}", schema.department, schema.industry);
                assert_eq!(&spec.name, name, "{context}");
                assert!(spec.priority_fields.iter().all(|f| spec.fields.contains_key(f)), "{context}: priority ⊄ fields");
                assert!(spec.required.iter().all(|f| spec.fields.contains_key(f)), "{context}: required ⊄ fields");
                assert!(spec.priority_fields.len() < spec.fields.len(), "{context}: nothing to strip");
                for relationship in &spec.relationships {
                    assert!(here.contains(relationship.to.as_str()), "{context}: {} leaves the schema", relationship.kind);
                }
            }
        }
    }

    #[test]
    fn field_kinds_are_snake_case() {
        assert_eq!(serde_json::from_str::<FieldKind>("\"datetime\"").unwrap(), FieldKind::Datetime);
        assert_eq!(serde_json::to_string(&FieldKind::Reference).unwrap(), "\"reference\"");
        assert!(serde_json::from_str::<FieldKind>("\"DateTime\"").is_err());
    }

    #[test]
    fn resolution_is_deterministic() {
        assert_eq!(resolve_schema(Department::Finance, Industry::Retail), resolve_schema(Department::Finance, Industry::Retail));
    }

    // ------------------------------------------------------------ the mandatory matrix (SPEC §4.1)

    #[test]
    fn customer_success_saas_has_the_standard_cs_entities() {
        let schema = resolve_schema(Department::CustomerSuccess, Industry::Saas);
        assert_eq!((schema.department, schema.industry), (Department::CustomerSuccess, Industry::Saas));
        assert_has(
            &schema,
            &[
                "account",
                "contact",
                "subscription",
                "renewal",
                "health_score_snapshot",
                "ticket",
                "nps_response",
                "usage_snapshot",
            ],
        );
        assert_rejects(&schema, &["patient", "provider", "care_plan", "pos_transaction", "inventory_item", "mrr_snapshot"]);
        assert_priority(&schema, "account", &["name", "arr", "health_score", "renewal_date", "seats_purchased"]);
        assert_priority(&schema, "subscription", &["plan_name", "mrr", "seats"]);
        assert_priority(&schema, "health_score_snapshot", &["score", "trend"]);
        let account = schema.require_type("account").unwrap();
        assert!(!account.priority_fields.contains("internal_notes"));
        assert!(!account.fields.contains_key("npi"));
        assert_eq!(account.pole_class, PoleClass::Organization);
    }

    #[test]
    fn customer_success_healthcare_applies_the_overlay() {
        let schema = resolve_schema(Department::CustomerSuccess, Industry::Healthcare);
        assert_has(&schema, &["patient", "provider", "care_plan", "appointment", "account", "contact", "ticket"]);
        assert_rejects(&schema, &["subscription", "usage_snapshot", "mrr_snapshot", "pos_transaction"]);
        assert_priority(&schema, "patient", &["full_name", "mrn", "date_of_birth", "primary_provider_id"]);
        assert_priority(&schema, "provider", &["full_name", "npi", "specialty"]);
        assert_eq!(schema.require_type("patient").unwrap().pole_class, PoleClass::Person);
        // The account override is merged in: a care organisation with an NPI.
        let account = schema.require_type("account").unwrap();
        assert!(account.description.contains("care"), "{}", account.description);
        assert_eq!(account.fields.get("npi"), Some(&FieldKind::String));
        assert!(account.priority_fields.contains("npi"));
        assert!(!account.fields.contains_key("seats_purchased"), "the SaaS override must not leak into healthcare");
        // The subscription was removed, so no relationship points at it.
        assert!(account.relationships.iter().all(|r| r.to != "subscription"));
        // And validation follows the healthcare schema, not the SaaS one.
        let ok = attrs(&[("name", "Mercy General".into()), ("npi", "1234567890".into())]);
        assert!(schema.check_write("account", &ok).is_ok());
        let saas = resolve_schema(Department::CustomerSuccess, Industry::Saas);
        assert!(saas.check_write("account", &ok).is_err());
    }

    #[test]
    fn finance_saas_has_subscription_and_mrr() {
        let schema = resolve_schema(Department::Finance, Industry::Saas);
        assert_has(&schema, &["subscription", "invoice", "mrr_snapshot", "payment", "revenue_schedule", "billing_plan"]);
        assert_rejects(&schema, &["pos_transaction", "inventory_item", "store", "patient", "claim"]);
        assert_priority(&schema, "mrr_snapshot", &["mrr", "arr", "new_mrr", "expansion_mrr", "churned_mrr", "net_new_mrr"]);
        assert_priority(&schema, "subscription", &["mrr", "plan_name", "status"]);
        assert_priority(&schema, "invoice", &["invoice_number", "amount", "status"]);
        let mrr = schema.require_type("mrr_snapshot").unwrap();
        assert_eq!(mrr.fields.get("mrr"), Some(&FieldKind::Money));
        assert!(mrr.required.contains("mrr"));
    }

    #[test]
    fn finance_retail_has_inventory_and_pos() {
        let schema = resolve_schema(Department::Finance, Industry::Retail);
        assert_has(&schema, &["inventory_item", "pos_transaction", "store", "sku", "purchase_order", "invoice"]);
        assert_rejects(&schema, &["subscription", "mrr_snapshot", "revenue_schedule", "patient", "usage_snapshot"]);
        assert_priority(&schema, "pos_transaction", &["transaction_number", "store_id", "total", "occurred_at"]);
        assert_priority(&schema, "inventory_item", &["sku_id", "on_hand", "reorder_point", "days_of_supply"]);
        assert_eq!(schema.require_type("store").unwrap().pole_class, PoleClass::Location);
        assert!(!schema.require_type("invoice").unwrap().fields.contains_key("claim_id"), "healthcare override leaked");
    }

    #[test]
    fn the_four_matrix_schemas_differ() {
        let schemas = [
            resolve_schema(Department::CustomerSuccess, Industry::Saas),
            resolve_schema(Department::CustomerSuccess, Industry::Healthcare),
            resolve_schema(Department::Finance, Industry::Saas),
            resolve_schema(Department::Finance, Industry::Retail),
        ];
        for (i, a) in schemas.iter().enumerate() {
            for b in &schemas[i + 1..] {
                assert_ne!(names(a), names(b), "{} × {} and {} × {}", a.department, a.industry, b.department, b.industry);
            }
        }
    }

    // ------------------------------------------------------------ field policy

    #[test]
    fn reads_strip_non_priority_fields() {
        let schema = resolve_schema(Department::CustomerSuccess, Industry::Saas);
        let stored = attrs(&[
            ("name", "Acme".into()),
            ("arr", Value::Int(120_000)),
            ("health_score", Value::Float(0.82)),
            ("internal_notes", "do not show agents".into()),
            ("external_ids", Value::Map(BTreeMap::new())),
            ("leftover_from_old_schema", Value::Bool(true)),
        ]);
        let visible = schema.strip_for_read("account", &stored).unwrap();
        assert_eq!(visible.keys().map(String::as_str).collect::<Vec<_>>(), ["arr", "health_score", "name"]);
        assert_eq!(visible.get("arr"), Some(&Value::Int(120_000)));
        let err = schema.strip_for_read("patient", &stored).unwrap_err();
        assert_eq!(err.code, ErrorCode::InvalidRequest);
    }

    #[test]
    fn writes_list_every_unknown_field_and_change_nothing() {
        let schema = resolve_schema(Department::Finance, Industry::Retail);
        let before = schema.clone();
        let payload = attrs(&[
            ("transaction_number", "T-1".into()),
            ("store_id", "store-7".into()),
            ("occurred_at", "2026-01-01T10:00:00Z".into()),
            ("mrr", Value::Int(10)),
            ("churned_mrr", Value::Int(1)),
            ("zz_custom", "x".into()),
        ]);
        let copy = payload.clone();
        let err = schema.check_write("pos_transaction", &payload).unwrap_err();
        assert_eq!(err.code, ErrorCode::InvalidRequest);
        assert_eq!(err.code.http_status(), 400);
        let fields: Vec<&str> = err.payload.field_errors.iter().map(|f| f.field.as_str()).collect();
        assert_eq!(fields, ["attributes.churned_mrr", "attributes.mrr", "attributes.zz_custom"]);
        for name in ["churned_mrr", "mrr", "zz_custom"] {
            assert!(err.message.contains(name), "{}", err.message);
        }
        assert!(err.message.contains("finance × retail"), "{}", err.message);
        // A pure check: neither the payload nor the schema changed.
        assert_eq!(payload, copy);
        assert_eq!(schema, before);
        // The same write without the unknown fields passes.
        let clean: Attributes =
            payload.into_iter().filter(|(k, _)| !["mrr", "churned_mrr", "zz_custom"].contains(&k.as_str())).collect();
        assert!(schema.check_write("pos_transaction", &clean).is_ok());
    }

    #[test]
    fn writes_report_missing_required_fields_with_unknown_ones() {
        let schema = resolve_schema(Department::Finance, Industry::Saas);
        // mrr_snapshot requires period and mrr; mrr is null, period absent.
        let payload = attrs(&[("mrr", Value::Null), ("arr", Value::Int(1)), ("bogus", Value::Int(2))]);
        let err = schema.check_write("mrr_snapshot", &payload).unwrap_err();
        let fields: Vec<&str> = err.payload.field_errors.iter().map(|f| f.field.as_str()).collect();
        assert_eq!(fields, ["attributes.bogus", "attributes.mrr", "attributes.period"]);
        assert!(err.message.contains("unknown fields: bogus"), "{}", err.message);
        assert!(err.message.contains("missing required fields: mrr, period"), "{}", err.message);
        let only_missing = schema.check_write("mrr_snapshot", &attrs(&[("period", "2026-01".into())])).unwrap_err();
        assert_eq!(only_missing.payload.field_errors.len(), 1);
        assert_eq!(only_missing.payload.field_errors[0].field, "attributes.mrr");
        assert!(!only_missing.message.contains("unknown"));
    }

    #[test]
    fn writes_to_a_type_outside_the_schema_are_refused() {
        let schema = resolve_schema(Department::CustomerSuccess, Industry::Healthcare);
        let err = schema.check_write("subscription", &attrs(&[("plan_name", "Pro".into())])).unwrap_err();
        assert_eq!(err.code, ErrorCode::InvalidRequest);
        assert_eq!(err.payload.field_errors[0].field, "type");
        assert!(err.message.contains("customer_success × healthcare"), "{}", err.message);
        assert!(err.message.contains("patient"), "the message lists the tenant's types: {}", err.message);
    }

    #[test]
    fn overly_long_type_names_are_not_echoed_in_full() {
        let schema = resolve_schema(Department::Sales, Industry::Media);
        let long = "x".repeat(10_000);
        let err = schema.require_type(&long).unwrap_err();
        assert!(err.message.len() < 2_000, "{}", err.message.len());
    }

    #[test]
    fn overrides_apply_only_where_the_type_is_present_and_only_to_their_industry() {
        let people_pro = resolve_schema(Department::People, Industry::ProfessionalServices);
        assert_priority(&people_pro, "employee", &["practice", "billable_target"]);
        let people_saas = resolve_schema(Department::People, Industry::Saas);
        assert!(!people_saas.require_type("employee").unwrap().fields.contains_key("practice"));
        let ops_mfg = resolve_schema(Department::Operations, Industry::Manufacturing);
        let work_order = ops_mfg.require_type("work_order").unwrap();
        assert!(work_order.priority_fields.contains("production_line_id"));
        assert!(work_order.relationships.iter().any(|r| r.kind == "on_line" && r.to == "production_line"));
    }
}
