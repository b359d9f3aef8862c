//! The rmcp `ServerHandler`: initialize/discover info, gated `tools/list`, and
//! `tools/call` dispatched to application services.

use std::borrow::Cow;
use std::sync::Arc;

use domain::principal::CallerContext;
use domain::{EntityType, Error, Id};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation, JsonObject, ListToolsResult, PaginatedRequestParams,
    ProtocolVersion, ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use services::Services;
use services::entities::SearchQuery;

use crate::catalogue::{self, ToolSpec};
use crate::render;

/// Protocol revisions this server implements (SPEC §7.1).
pub const PROTOCOL_VERSIONS: &[ProtocolVersion] =
    &[ProtocolVersion::V_2026_07_28, ProtocolVersion::V_2025_11_25, ProtocolVersion::V_2025_06_18];

#[derive(Clone)]
pub struct ContinuityMcp {
    services: Services,
    /// Set for transports without HTTP (stdio), where the caller is fixed at start.
    fixed_caller: Option<Arc<CallerContext>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EntityGetArgs {
    #[serde(rename = "type")]
    entity_type: String,
    id: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EntitySearchArgs {
    query: String,
    #[serde(rename = "type")]
    entity_type: Option<String>,
    limit: Option<u32>,
}

fn parse_args<T: DeserializeOwned>(args: Option<JsonObject>) -> Result<T, Error> {
    let value = Value::Object(args.unwrap_or_default());
    serde_json::from_value(value).map_err(|e| Error::invalid(format!("invalid arguments: {e}")))
}

fn to_tool(spec: &ToolSpec) -> Tool {
    let as_object = |v: Value| Arc::new(v.as_object().cloned().unwrap_or_default());
    let mut annotations = ToolAnnotations::with_title(spec.title);
    annotations.read_only_hint = Some(spec.read_only);
    annotations.open_world_hint = Some(false);
    Tool::new_with_raw(spec.name, Some(Cow::Borrowed(spec.description)), as_object((spec.input_schema)()))
        .with_title(spec.title)
        .with_raw_output_schema(as_object((spec.output_schema)()))
        .with_annotations(annotations)
}

impl ContinuityMcp {
    /// A handler for HTTP transports: the caller comes from each request.
    pub fn new(services: Services) -> Self {
        Self { services, fixed_caller: None }
    }

    /// A handler for one fixed caller (stdio).
    pub fn for_caller(services: Services, caller: CallerContext) -> Self {
        Self { services, fixed_caller: Some(Arc::new(caller)) }
    }

    fn caller(&self, ctx: &RequestContext<RoleServer>) -> Result<CallerContext, McpError> {
        if let Some(c) = &self.fixed_caller {
            return Ok((**c).clone());
        }
        ctx.extensions
            .get::<http::request::Parts>()
            .and_then(|p| p.extensions.get::<CallerContext>())
            .cloned()
            // The gateway authenticates before rmcp sees a request; reaching this means
            // the router was wired without it, so fail closed.
            .ok_or_else(|| McpError::invalid_request("unauthenticated", None))
    }

    /// Runs one tool for `caller`; every outcome is audited.
    pub async fn call(&self, caller: &CallerContext, name: &str, args: Option<JsonObject>) -> Result<CallToolResult, McpError> {
        let spec = catalogue::find(name).ok_or_else(|| McpError::invalid_params(format!("unknown tool: {name}"), None))?;
        let outcome = match spec.check(caller) {
            Ok(()) => self.dispatch(caller, spec, args).await,
            Err(e) => Err(e),
        };
        let code = outcome.as_ref().map_or_else(|e| e.code.as_str(), |_| "ok");
        self.services.audit.record(&caller.tenant, caller.principal.as_str(), &format!("tool:{name}"), None, code).await;
        Ok(match outcome {
            Ok(r) => r,
            Err(e) => render::error(&e),
        })
    }

    async fn dispatch(&self, caller: &CallerContext, spec: &ToolSpec, args: Option<JsonObject>) -> Result<CallToolResult, Error> {
        match spec.name {
            "spine.entity.get" => {
                let a: EntityGetArgs = parse_args(args)?;
                let entity_type = EntityType::new(a.entity_type)?;
                let id = Id::new(a.id)?;
                let e = self.services.entities.get(caller, &entity_type, &id).await?;
                Ok(render::success(json!({ "entity": render::entity_json(&e) }), render::entity_text(&e)))
            }
            "spine.entity.search" => {
                let a: EntitySearchArgs = parse_args(args)?;
                let entity_type = a.entity_type.map(EntityType::new).transpose()?;
                let res =
                    self.services.entities.search(caller, &SearchQuery { text: a.query, entity_type, limit: a.limit }).await?;
                let list: Vec<Value> = res.entities.iter().map(render::entity_json).collect();
                let mut text = format!("{} matching entities", res.entities.len());
                if res.truncated {
                    text.push_str(&format!(" (scanned the first {} entities only)", res.scanned));
                }
                for e in &res.entities {
                    text.push_str(&format!("\n- {} {}: {}", e.entity_type, e.id, e.label()));
                }
                Ok(render::success(json!({ "entities": list, "count": list.len(), "truncated": res.truncated }), text))
            }
            other => Err(Error::internal(format!("tool {other} is catalogued but has no handler"))),
        }
    }
}

impl ServerHandler for ContinuityMcp {
    fn get_info(&self) -> ServerConfig {
        let caps = ServerCapabilities::builder().enable_tools().enable_tool_list_changed().build();
        let mut info = ServerConfig::new(caps).with_server_info(Implementation::new("continuity", env!("CARGO_PKG_VERSION")));
        info.instructions = Some(
            "Continuity is the organisation's governed memory and business context. Read entities with spine.entity.get / spine.entity.search; \
             everything you read is normalized truth from the tenant's Spine."
                .into(),
        );
        info
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(PROTOCOL_VERSIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let caller = self.caller(&context)?;
        let tools = catalogue::tools().iter().filter(|t| t.check(&caller).is_ok()).map(to_tool).collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let caller = self.caller(&context)?;
        self.call(&caller, &request.name, request.arguments).await.map(CallToolResponse::from)
    }
}
