//! Capabilities: every MCP tool call and every `/v1/capabilities` call resolves through
//! the ADK here, then executes what this version serves.
//!
//! The tenant's configuration (5 min) and connector statuses (30 s) come through the
//! cache tiers of SPEC §4.4; the registry document 24 h. Org-memory capabilities are
//! never cached (`cache_ttl_secs: None` in the registry).

use std::time::Duration;

use adk::resolve::{Listed, list};
use adk::{Resolution, ResolveRequest, TenantView, resolve};
use domain::connector::ConnectorStatus;
use domain::principal::CallerContext;
use domain::spine::Entity;
use domain::tenant::Tenant;
use domain::value::Attributes;
use domain::{EntityType, Error, ErrorCode, Id, PageRequest, Result};
use ports::records::ConnectorStore;
use ports::{Backend, CacheKey};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::auth::Authenticator;
use crate::entities::{EntityService, SearchQuery};

/// Connector statuses are cached this long (SPEC §4.4).
pub const CONNECTOR_STATUS_TTL: Duration = Duration::from_secs(30);
/// The capability registry document is cached this long.
pub const REGISTRY_TTL: Duration = Duration::from_secs(24 * 3600);

/// Registered capabilities this version does not execute yet: they resolve, then answer
/// plainly that they are not served. Everything else in the registry is served.
pub const NOT_SERVED: &[&str] = &["spine.entity.create", "task.list", "task.dispatch", "connector.write"];

/// Whether this version executes `name`.
pub fn served(name: &str) -> bool {
    !NOT_SERVED.contains(&name)
}

/// A capability's result: data for programs, text for models.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub resolution: Resolution,
    pub data: Value,
    pub text: String,
}

#[derive(Clone)]
pub struct CapabilityService {
    backend: Backend,
    auth: Authenticator,
    entities: EntityService,
    graph: crate::graph::GraphService,
}

/// The parts of a request body the resolver looks at.
#[derive(Debug, Default, Deserialize)]
struct Hints {
    #[serde(rename = "type")]
    entity_type: Option<String>,
    attributes: Option<Attributes>,
    source: Option<String>,
}

pub(crate) fn connectors_key(tenant: &domain::TenantId) -> CacheKey {
    CacheKey::tenant(tenant, "connector", "all")
}

fn parse_args<T: serde::de::DeserializeOwned>(args: &Value) -> Result<T> {
    serde_json::from_value(args.clone()).map_err(|e| Error::invalid(format!("invalid arguments: {e}")))
}

/// An entity as readers see it: only the type's priority fields (SPEC §5.2 step 4).
pub fn visible_entity(e: &Entity, schema: &adk::schema::TenantSchema) -> Option<Value> {
    let attributes = schema.strip_for_read(e.entity_type.as_str(), &e.attributes).ok()?;
    Some(json!({
        "type": e.entity_type.as_str(),
        "id": e.id.as_str(),
        "pole_class": e.pole_class.as_str(),
        "attributes": serde_json::to_value(&attributes).unwrap_or(Value::Null),
        "updated_at": e.updated_at.to_rfc3339(),
        "version": e.version,
    }))
}

fn entity_text(v: &Value) -> String {
    let mut out = format!("{} {}", v["type"].as_str().unwrap_or(""), v["id"].as_str().unwrap_or(""));
    if let Some(attrs) = v["attributes"].as_object() {
        for (k, val) in attrs {
            out.push_str(&format!("\n  {k}: {val}"));
        }
    }
    out
}

/// A tenant's schema as JSON: every entity type with its POLE+O class, visible
/// (priority) fields, required fields and relationships.
pub fn schema_document(tenant: &Tenant) -> Value {
    let schema = adk::resolve::schema_for(tenant.department, tenant.industry);
    let types: Vec<Value> = schema
        .entity_types
        .values()
        .map(|t| {
            json!({
                "name": t.name,
                "pole_class": t.pole_class.as_str(),
                "description": t.description,
                "priority_fields": t.priority_fields,
                "required": t.required,
                "relationships": t.relationships.iter().map(|r| json!({"kind": r.kind, "to": r.to})).collect::<Vec<_>>(),
            })
        })
        .collect();
    json!({
        "department": tenant.department.as_str(),
        "industry": tenant.industry.as_str(),
        "entity_types": types,
    })
}

impl CapabilityService {
    pub fn new(backend: Backend, auth: Authenticator, entities: EntityService, graph: crate::graph::GraphService) -> Self {
        Self { backend, auth, entities, graph }
    }

    /// The tenant's configuration and connectors, through their cache tiers. `None`
    /// when they cannot be loaded (the resolver then answers `RESOLVER_DEGRADED`).
    pub async fn tenant_state(&self, caller: &CallerContext) -> Option<(Tenant, Vec<ConnectorStatus>)> {
        let tenant = match self.auth.tenant_config(&caller.tenant).await {
            Ok(Some(t)) => t,
            Ok(None) => return None,
            Err(e) => {
                tracing::warn!(tenant = %caller.tenant, error = %e, "tenant config unavailable");
                return None;
            }
        };
        let key = connectors_key(&caller.tenant);
        if let Ok(Some(bytes)) = self.backend.cache.get(&key).await
            && let Ok(c) = serde_json::from_slice::<Vec<ConnectorStatus>>(&bytes)
        {
            return Some((tenant, c));
        }
        match self.backend.records.list_connectors(&caller.tenant, &PageRequest::first(500)).await {
            Ok(page) => {
                if let Ok(bytes) = serde_json::to_vec(&page.items) {
                    let _ = self.backend.cache.set(&key, &bytes, CONNECTOR_STATUS_TTL).await;
                }
                Some((tenant, page.items))
            }
            Err(e) => {
                tracing::warn!(tenant = %caller.tenant, error = %e, "connector statuses unavailable");
                None
            }
        }
    }

    /// Resolves `name` for `caller` with the request's arguments.
    ///
    /// # Errors
    /// Any taxonomy answer of [`adk::resolve`].
    pub async fn resolve(&self, caller: &CallerContext, name: &str, args: &Value) -> Result<Resolution> {
        let hints: Hints = serde_json::from_value(args.clone()).unwrap_or_default();
        let state = self.tenant_state(caller).await;
        let view = state.as_ref().map(|(t, c)| TenantView { tenant: t, connectors: c });
        let req = ResolveRequest {
            capability: name,
            scopes: &caller.scopes,
            entity_type: hints.entity_type.as_deref(),
            attributes: hints.attributes.as_ref(),
            source: hints.source.as_deref(),
        };
        resolve(&req, view.as_ref())
    }

    /// Every capability with what this caller may use and what would unlock the rest.
    ///
    /// # Errors
    /// `RESOLVER_DEGRADED` when the tenant configuration cannot be loaded.
    pub async fn list(&self, caller: &CallerContext) -> Result<(Tenant, Vec<Listed>)> {
        let (tenant, connectors) = self.tenant_state(caller).await.ok_or_else(|| {
            Error::new(ErrorCode::ResolverDegraded, "the tenant configuration cannot be loaded right now; retry shortly")
                .with_retry_after(adk::resolve::DEGRADED_RETRY_AFTER_SECS)
        })?;
        let listed = list(&caller.scopes, &TenantView { tenant: &tenant, connectors: &connectors });
        Ok((tenant, listed))
    }

    /// The registry as a document (for clients that cache it), through its 24 h tier.
    pub async fn registry_document(&self) -> Value {
        let key = CacheKey::global("registry", env!("CARGO_PKG_VERSION"));
        if let Ok(Some(bytes)) = self.backend.cache.get(&key).await
            && let Ok(v) = serde_json::from_slice(&bytes)
        {
            return v;
        }
        let doc = json!(
            adk::registry::REGISTRY
                .iter()
                .map(|c| json!({
                    "name": c.name,
                    "channel": c.channel.as_str(),
                    "min_tier": c.min_tier.as_str(),
                    "scopes": c.scopes.iter().map(|s| s.as_str()).collect::<Vec<_>>(),
                    "route": c.route.as_str(),
                    "read_only": c.read_only,
                    "description": c.description,
                    "served": served(c.name),
                }))
                .collect::<Vec<_>>()
        );
        if let Ok(bytes) = serde_json::to_vec(&doc) {
            let _ = self.backend.cache.set(&key, &bytes, REGISTRY_TTL).await;
        }
        doc
    }

    /// The tenant's resolved Spine schema as a document (`continuity://schema`,
    /// `continuity tenant show --schema`).
    ///
    /// # Errors
    /// `RESOLVER_DEGRADED` when the tenant configuration cannot be loaded.
    pub async fn schema_document(&self, caller: &CallerContext) -> Result<Value> {
        let tenant = self.auth.tenant_config(&caller.tenant).await.ok().flatten().ok_or_else(|| {
            Error::new(ErrorCode::ResolverDegraded, "the tenant configuration cannot be loaded right now; retry shortly")
                .with_retry_after(adk::resolve::DEGRADED_RETRY_AFTER_SECS)
        })?;
        Ok(schema_document(&tenant))
    }

    /// An MCP prompt's text for `caller`: `project_handoff_summary` (needs `project`) or
    /// `morning_brief`. Prompts read like `session.get_context` does, so they need what it
    /// needs (the starter plan and `tenant:read`).
    ///
    /// # Errors
    /// `NOT_FOUND` for an unknown prompt; `INVALID_REQUEST` for bad arguments; the
    /// resolver's answer when the caller may not read context.
    pub async fn prompt(&self, caller: &CallerContext, name: &str, args: &serde_json::Map<String, Value>) -> Result<String> {
        let resolution = self.resolve(caller, "session.get_context", &json!({})).await?;
        let tools = crate::tools::Tools { backend: &self.backend, entities: &self.entities, schema: resolution.schema };
        match name {
            "project_handoff_summary" => {
                let project =
                    args.get("project").and_then(Value::as_str).ok_or_else(|| Error::invalid_field("project", "required"))?;
                tools.prompt_project_handoff(caller, project).await
            }
            "morning_brief" => tools.prompt_morning_brief(caller).await,
            other => Err(Error::not_found(format!("prompt {other}"))),
        }
    }

    /// Resolves, then executes. Arguments are a JSON object.
    ///
    /// # Errors
    /// The resolver's taxonomy answer; `INVALID_REQUEST` for bad arguments;
    /// `NOT_FOUND`; `UNAVAILABLE`; `CAPABILITY_NOT_FOUND` for a registered capability this
    /// version does not serve yet (said plainly in the message).
    pub async fn execute(&self, caller: &CallerContext, name: &str, args: Value) -> Result<Outcome> {
        if !args.is_object() {
            return Err(Error::invalid("arguments must be a JSON object"));
        }
        let resolution = self.resolve(caller, name, &args).await?;
        let schema = resolution.schema;
        let (data, text) = match resolution.spec.name {
            "spine.entity.get" => {
                #[derive(Deserialize)]
                #[serde(deny_unknown_fields)]
                struct A {
                    #[serde(rename = "type")]
                    entity_type: String,
                    id: String,
                }
                let a: A = parse_args(&args)?;
                let e = self.entities.get(caller, &EntityType::new(a.entity_type)?, &Id::new(a.id)?).await?;
                let v = visible_entity(&e, schema).ok_or_else(|| Error::not_found(format!("{} {}", e.entity_type, e.id)))?;
                let text = entity_text(&v);
                (json!({ "entity": v }), text)
            }
            "spine.entity.list" => {
                // Entities (of one type, or all), paged by an opaque cursor.
                #[derive(Deserialize)]
                #[serde(deny_unknown_fields)]
                struct A {
                    #[serde(rename = "type")]
                    entity_type: Option<String>,
                    limit: Option<u32>,
                    cursor: Option<String>,
                }
                let a: A = parse_args(&args)?;
                let entity_type = a.entity_type.map(EntityType::new).transpose()?;
                let size = a.limit.unwrap_or(50).clamp(1, 200);
                let page = match a.cursor {
                    Some(c) if c.len() <= 1024 => PageRequest::after(size, c),
                    Some(_) => return Err(Error::invalid_field("cursor", "not a cursor this API returned")),
                    None => PageRequest::first(size),
                };
                let p = self.entities.list(caller, entity_type.as_ref(), &page).await?;
                let list: Vec<Value> = p.items.iter().filter_map(|e| visible_entity(e, schema)).collect();
                let text = format!("{} entities{}", list.len(), if p.next_cursor.is_some() { " (more follow)" } else { "" });
                (json!({ "entities": list, "count": list.len(), "next_cursor": p.next_cursor }), text)
            }
            "spine.entity.search" => {
                #[derive(Deserialize)]
                #[serde(deny_unknown_fields)]
                struct A {
                    #[serde(default)]
                    query: String,
                    #[serde(rename = "type")]
                    entity_type: Option<String>,
                    limit: Option<u32>,
                }
                let a: A = parse_args(&args)?;
                let entity_type = a.entity_type.map(EntityType::new).transpose()?;
                let res = self.entities.search(caller, &SearchQuery { text: a.query, entity_type, limit: a.limit }).await?;
                // Entities of types outside this tenant's schema are not visible at all.
                let list: Vec<Value> = res.entities.iter().filter_map(|e| visible_entity(e, schema)).collect();
                let mut text = format!("{} matching entities", list.len());
                if res.truncated {
                    text.push_str(&format!(" (scanned the first {} entities only)", res.scanned));
                }
                for v in &list {
                    let label = v["attributes"]["name"].as_str().or(v["attributes"]["title"].as_str()).unwrap_or("");
                    text.push_str(&format!(
                        "\n- {} {}: {label}",
                        v["type"].as_str().unwrap_or(""),
                        v["id"].as_str().unwrap_or("")
                    ));
                }
                (json!({ "entities": list, "count": list.len(), "truncated": res.truncated }), text)
            }
            other if other.starts_with("memory.graph_") => self.graph.run(caller, &other["memory.graph_".len()..], &args).await?,
            other => {
                crate::tools::Tools { backend: &self.backend, entities: &self.entities, schema }.run(caller, other, &args).await?
            }
        };
        Ok(Outcome { resolution, data, text })
    }
}
