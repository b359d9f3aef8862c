//! The rmcp `ServerHandler`: initialize/discover info, `tools/list` and `tools/call`
//! resolved through the ADK (via the capability service), and the tenant schema as a
//! resource.

use std::borrow::Cow;
use std::sync::Arc;

use domain::Error;
use domain::principal::{CallerContext, Scope, Toolset};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, GetPromptRequestParams, GetPromptResponse, GetPromptResult,
    Implementation, JsonObject, ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, ListToolsResult,
    PaginatedRequestParams, Prompt, PromptArgument, PromptMessage, ProtocolVersion, ReadResourceRequestParams,
    ReadResourceResponse, ReadResourceResult, Resource, ResourceContents, ResourceTemplate, ServerCapabilities, ServerConfig,
    Tool, ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::Value;
use services::Services;
use services::changes::GRAPH_URI;

use crate::render;
use crate::tools::{Answer, McpTool};

/// Protocol revisions this server implements (SPEC §7.1).
pub const PROTOCOL_VERSIONS: &[ProtocolVersion] =
    &[ProtocolVersion::V_2026_07_28, ProtocolVersion::V_2025_11_25, ProtocolVersion::V_2025_06_18];

/// The tenant's Spine schema (department × industry) as a resource.
pub const SCHEMA_URI: &str = "continuity://schema";
/// What the caller may use, and what would unlock the rest.
pub const CAPABILITIES_URI: &str = "continuity://capabilities";
/// One entity (its visible fields), through the ADK like `spine.entity.get`.
pub const ENTITY_TEMPLATE: &str = "continuity://entities/{type}/{id}";
/// The schema a project's records follow (the tenant's).
pub const PROJECT_SCHEMA_TEMPLATE: &str = "continuity://projects/{project}/schema";

/// A prompt argument: name, description, required.
type PromptArg = (&'static str, &'static str, bool);

/// The prompts: name, title, description, arguments.
const PROMPTS: &[(&str, &str, &str, &[PromptArg])] = &[
    (
        "project_handoff_summary",
        "Project handoff summary",
        "A handoff summary of one project from its book-of-projects entries, the org memory that mentions it and open proposals.",
        &[("project", "The project's name as used in the book of projects.", true)],
    ),
    (
        "morning_brief",
        "Morning brief",
        "A brief of what changed (signals), what waits for a decision, where you left off and what was recently decided.",
        &[],
    ),
];

fn invalid_params(e: &Error) -> McpError {
    McpError::invalid_params(format!("{}: {}", e.code, e.message), None)
}

#[derive(Clone)]
pub struct ContinuityMcp {
    services: Services,
    /// Set for transports without HTTP (stdio), where the caller is fixed at start.
    fixed_caller: Option<Arc<CallerContext>>,
    /// Whether this handler serves one long-lived session (SSE on `continuity serve`,
    /// stdio) and so may push notifications; stateless requests never do.
    session: bool,
    /// Resources this session subscribed to (`resources/subscribe`).
    subscriptions: Arc<std::sync::Mutex<std::collections::HashSet<String>>>,
}

/// How often a session re-reads its tenant's configuration to notice plan changes made
/// by another process (the `continuity` CLI).
pub const PLAN_POLL: std::time::Duration = std::time::Duration::from_secs(2);
/// Most resources one session may subscribe to.
pub const MAX_SUBSCRIPTIONS: usize = 1000;

/// The structured content of a failed call (SPEC §7.3): the taxonomy code, a message
/// and the code's payload fields.
fn error_schema() -> Value {
    serde_json::json!({
        "type": "object",
        "properties": {
            "code": {"type": "string", "description": "The failure code (SPEC §7.3), e.g. NOT_FOUND, PLAN_INSUFFICIENT, INVALID_REQUEST."},
            "message": {"type": "string"},
            "upgrade_url": {"type": "string"},
            "connect_url": {"type": "string"},
            "syncing": {"type": "boolean"},
            "progress": {"type": "number"},
            "data": {"type": "null"},
            "retry_after": {"type": "integer"},
            "field_errors": {"type": "array"},
            "required_scope": {"type": "string"}
        },
        "required": ["code", "message"]
    })
}

/// A tool's declared output: its result, or (with `isError`) a taxonomy error. Clients
/// such as the TypeScript SDK validate error results against the output schema too, so
/// both shapes are declared.
pub fn output_schema(tool: &McpTool) -> Value {
    serde_json::json!({"type": "object", "anyOf": [(tool.output_schema)(), error_schema()]})
}

fn to_tool(tool: &'static McpTool) -> Tool {
    let as_object = |v: Value| Arc::new(v.as_object().cloned().unwrap_or_default());
    let mut annotations = ToolAnnotations::with_title(tool.title);
    annotations.read_only_hint = Some(tool.read_only());
    annotations.open_world_hint = Some(false);
    Tool::new_with_raw(tool.name(), Some(Cow::Borrowed(tool.description)), as_object((tool.input_schema)()))
        .with_title(tool.title)
        .with_raw_output_schema(as_object(output_schema(tool)))
        .with_annotations(annotations)
}

fn degraded(e: &Error) -> McpError {
    McpError::internal_error(format!("{}: {}", e.code, e.message), None)
}

impl ContinuityMcp {
    /// A handler for stateless HTTP requests: the caller comes from each request.
    pub fn new(services: Services) -> Self {
        Self { services, fixed_caller: None, session: false, subscriptions: Arc::default() }
    }

    /// A handler for one HTTP session (`Mcp-Session-Id`, SSE notifications).
    pub fn for_session(services: Services) -> Self {
        Self { session: true, ..Self::new(services) }
    }

    /// A handler for one fixed caller (stdio), which is one session.
    pub fn for_caller(services: Services, caller: CallerContext) -> Self {
        Self { services, fixed_caller: Some(Arc::new(caller)), session: true, subscriptions: Arc::default() }
    }

    /// Pushes what changes for this session's caller until the session ends: the tool,
    /// prompt and resource lists when the tenant's plan or tier overrides change (polled,
    /// so a change made by the CLI in another process is seen too), and
    /// `resources/updated` for subscribed entities written in this process.
    fn watch(&self, caller: CallerContext, peer: rmcp::Peer<RoleServer>) {
        let services = self.services.clone();
        let subscriptions = self.subscriptions.clone();
        tokio::spawn(async move {
            let mut changes = services.changes.subscribe();
            let fingerprint = |t: &domain::tenant::Tenant| (t.plan, t.tier_overrides.clone(), t.department, t.industry);
            let mut last = services.admin.show_tenant(&caller.tenant).await.ok().map(|t| fingerprint(&t));
            let mut tick = tokio::time::interval(PLAN_POLL);
            loop {
                if peer.is_transport_closed() {
                    break;
                }
                tokio::select! {
                    change = changes.recv() => {
                        let change = match change {
                            Ok(c) => c,
                            Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                            Err(_) => break,
                        };
                        let uri = change.resource_uri();
                        let subscribed = subscriptions.lock().map(|s| s.contains(&uri)).unwrap_or(false);
                        if change.concerns(&caller) && subscribed
                            && peer.notify_resource_updated(rmcp::model::ResourceUpdatedNotificationParam::new(uri)).await.is_err()
                        {
                            break;
                        }
                    }
                    _ = tick.tick() => {
                        let Ok(t) = services.admin.show_tenant(&caller.tenant).await else { continue };
                        let now = Some(fingerprint(&t));
                        if now != last {
                            last = now;
                            // The 5-minute tenant-config cache must not hide the change.
                            services.auth.forget_tenant_config(&caller.tenant).await;
                            tracing::info!(tenant = %caller.tenant, "tenant configuration changed: notifying the session");
                            let sent = peer.notify_tool_list_changed().await.is_ok()
                                && peer.notify_prompt_list_changed().await.is_ok()
                                && peer.notify_resource_list_changed().await.is_ok();
                            if !sent {
                                break;
                            }
                        }
                    }
                }
            }
        });
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

    /// The tools this caller may call now: served by this version, allowed by the ADK
    /// for the tenant's plan and the caller's scopes.
    ///
    /// # Errors
    /// `RESOLVER_DEGRADED` when the tenant's configuration cannot be loaded.
    pub async fn visible_tools(&self, caller: &CallerContext) -> Result<Vec<Tool>, Error> {
        if !caller.scopes.contains(Scope::McpTools) {
            return Ok(Vec::new());
        }
        let (_, listed) = self.services.capabilities.list(caller).await?;
        let allowed = |capability: &str| listed.iter().any(|l| l.spec.name == capability && l.allowed);
        Ok(crate::tools::all().filter(|t| caller.toolsets.contains(t.toolset()) && allowed(t.capability)).map(to_tool).collect())
    }

    /// Runs one tool for `caller` within [`TOOL_DEADLINE`]: every call answers — its
    /// result, `UNAVAILABLE` when it took too long (it may still finish: check before
    /// retrying), or `INTERNAL` if the handler failed unexpectedly — never silence.
    pub async fn call(&self, caller: &CallerContext, name: &str, args: Option<JsonObject>) -> CallToolResult {
        rendered(self.run(caller, name, args).await)
    }

    /// [`Self::call`]'s outcome, typed: the answer, or the taxonomy error (which
    /// [`crate::render::error`] makes a result).
    ///
    /// # Errors
    /// The call's taxonomy error, as [`Self::call`] renders it.
    pub async fn run(&self, caller: &CallerContext, name: &str, args: Option<JsonObject>) -> domain::Result<Answer> {
        let (this, who, tool) = (self.clone(), caller.clone(), name.to_owned());
        let run = tokio::spawn(async move { this.call_now(&who, &tool, args).await });
        match tokio::time::timeout(TOOL_DEADLINE, run).await {
            Ok(Ok(outcome)) => outcome,
            Ok(Err(e)) => {
                tracing::error!(error = %e, "a tool call's handler failed");
                Err(Error::internal("the call failed unexpectedly; nothing more is known"))
            }
            Err(_) => Err(Error::unavailable(format!(
                "the call did not finish within {} s; it may still complete — check its effect before retrying",
                TOOL_DEADLINE.as_secs()
            ))
            .with_retry_after(5)),
        }
    }

    async fn call_now(&self, caller: &CallerContext, name: &str, args: Option<JsonObject>) -> domain::Result<Answer> {
        match (caller.scopes.require(Scope::McpTools), crate::tools::find(caller, name)) {
            (Err(e), _) => Err(self.services.capabilities.refuse(caller, name, e).await),
            (Ok(()), Some(tool)) => tool.call(&self.services, caller, Value::Object(args.unwrap_or_default())).await,
            (Ok(()), None) => {
                let e = Error::new(
                    domain::ErrorCode::CapabilityNotFound,
                    format!(
                        "no tool {} in your toolsets ({})",
                        name.chars().take(96).collect::<String>(),
                        caller.toolsets.to_list_string()
                    ),
                );
                Err(self.services.capabilities.refuse(caller, name, e).await)
            }
        }
    }
}

fn rendered(outcome: domain::Result<Answer>) -> CallToolResult {
    match outcome.and_then(|a| Ok((a.to_value()?, a.text))) {
        Ok((data, text)) => render::success(data, text),
        Err(e) => render::error(&e),
    }
}

/// Whether an idempotent call's failure is kept as its outcome: not when a later send
/// could succeed (the dependency, the rate limit or the resolver recovers; an internal
/// failure is not the caller's).
fn kept(code: domain::ErrorCode) -> bool {
    use domain::ErrorCode::{Internal, RateLimited, ResolverDegraded, Unavailable};
    !matches!(code, Unavailable | RateLimited | Internal | ResolverDegraded)
}

/// The longest a tool call runs before its caller is answered `UNAVAILABLE`.
pub const TOOL_DEADLINE: std::time::Duration = std::time::Duration::from_secs(30);

/// The `_meta` field of a `tools/call` naming its idempotency key: a call sent again
/// with the same key (by `continuity stdio --url` replaying its buffer) answers the
/// first call's result instead of running twice.
pub const IDEMPOTENCY_META: &str = "continuity.dev/idempotency-key";

impl ContinuityMcp {
    /// [`Self::call`] at most once per `(caller's principal, key)`: the first call runs
    /// and its result is kept; a repeat gets that result back, marked
    /// `_meta["continuity.dev/replayed"] = true`.
    pub async fn call_once(&self, caller: &CallerContext, key: &str, name: &str, args: Option<JsonObject>) -> CallToolResult {
        let fingerprint = services::calls::fingerprint(name, &Value::Object(args.clone().unwrap_or_default()));
        match services::calls::begin(&self.services, caller, key, &fingerprint).await {
            Err(e) => render::error(&e),
            Ok(services::calls::Begun::First { started_at }) => {
                let ran = self.run(caller, name, args).await;
                // A failure worth retrying is not kept: the next send with the key runs again.
                let retry = ran.as_ref().is_err_and(|e| !kept(e.code));
                let result = rendered(ran);
                let outcome = serde_json::to_value(&result).unwrap_or(Value::Null);
                let done = (started_at, fingerprint.as_str());
                if let Err(e) = services::calls::finish(&self.services, caller, key, done, outcome, retry).await {
                    tracing::warn!(code = ?e.code, "the outcome of an idempotent call was not kept; a repeat will be told it is unknown");
                }
                result
            }
            Ok(services::calls::Begun::Done(outcome)) => match serde_json::from_value::<CallToolResult>(outcome) {
                Ok(mut r) => {
                    let mut meta = r.meta.take().unwrap_or_default();
                    meta.insert("continuity.dev/replayed".into(), Value::Bool(true));
                    r.meta = Some(meta);
                    r
                }
                Err(_) => render::error(&Error::internal("a kept call outcome could not be read")),
            },
        }
    }
}

impl ServerHandler for ContinuityMcp {
    fn get_info(&self) -> ServerConfig {
        // Change notifications need a session to travel on: advertised on sessions
        // (SSE on `continuity serve`, stdio), not on stateless requests (Lambda).
        let caps = if self.session {
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .enable_resources()
                .enable_resources_list_changed()
                .enable_resources_subscribe()
                .enable_prompts()
                .enable_prompts_list_changed()
                .build()
        } else {
            ServerCapabilities::builder().enable_tools().enable_resources().enable_prompts().build()
        };
        let mut info = ServerConfig::new(caps).with_server_info(Implementation::new("continuity", env!("CARGO_PKG_VERSION")));
        info.instructions = Some(
            "Continuity is the organisation's governed memory and business context. \
             Read business entities with spine_entity_get / spine_entity_search / spine_relationship_list and signals with signal_list; \
             assemble context for a task with session_get_context. Search approved organisational memory with memory_search_org before answering how things are done here. \
             Record your conversation with memory_write_conversational and continue it later with memory_read_conversational. \
             You can propose (memory_propose, proposal_create, session_summarize) but never decide: proposals stay pending until governance and a person decide. \
             The resource continuity://schema lists this tenant's entity types and fields."
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
        let tools = self.visible_tools(&caller).await.map_err(|e| degraded(&e))?;
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let caller = self.caller(&context)?;
        // rmcp hands the request's `_meta` to the context; the params keep it on some paths.
        let key = context
            .meta
            .0
            .get(IDEMPOTENCY_META)
            .or_else(|| request.meta.as_ref().and_then(|m| m.0.get(IDEMPOTENCY_META)))
            .and_then(Value::as_str)
            .map(str::to_owned);
        let result = match key {
            Some(key) => self.call_once(&caller, &key, &request.name, request.arguments).await,
            None => self.call(&caller, &request.name, request.arguments).await,
        };
        Ok(CallToolResponse::from(result))
    }

    async fn on_initialized(&self, context: rmcp::service::NotificationContext<RoleServer>) {
        if !self.session {
            return;
        }
        let caller = match &self.fixed_caller {
            Some(c) => Some((**c).clone()),
            None => context.extensions.get::<http::request::Parts>().and_then(|p| p.extensions.get::<CallerContext>()).cloned(),
        };
        if let Some(caller) = caller {
            self.watch(caller, context.peer);
        }
    }

    async fn subscribe(
        &self,
        request: rmcp::model::SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let caller = self.caller(&context)?;
        caller
            .scopes
            .require(Scope::McpResources)
            .map_err(|e| McpError::invalid_request(format!("{}: {}", e.code, e.message), None))?;
        if !self.session {
            return Err(McpError::invalid_request("subscriptions need a session (Mcp-Session-Id)", None));
        }
        let graph = request.uri == GRAPH_URI && caller.toolsets.contains(Toolset::Graph);
        if !graph && (!request.uri.starts_with("continuity://entities/") || request.uri.len() > 512) {
            return Err(McpError::invalid_params(
                "only entity resources (continuity://entities/{type}/{id}) and, with the graph toolset, \
                 memory://knowledge-graph can be subscribed to",
                None,
            ));
        }
        let mut subs = self.subscriptions.lock().map_err(|_| McpError::internal_error("subscriptions lock", None))?;
        if subs.len() >= MAX_SUBSCRIPTIONS && !subs.contains(&request.uri) {
            return Err(McpError::invalid_params(format!("at most {MAX_SUBSCRIPTIONS} subscriptions per session"), None));
        }
        subs.insert(request.uri);
        Ok(())
    }

    async fn unsubscribe(
        &self,
        request: rmcp::model::UnsubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.caller(&context)?;
        if let Ok(mut subs) = self.subscriptions.lock() {
            subs.remove(&request.uri);
        }
        Ok(())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let caller = self.caller(&context)?;
        let mut resources = Vec::new();
        if caller.scopes.contains(Scope::McpResources) {
            resources.push(
                Resource::new(SCHEMA_URI, "schema")
                    .with_title("Tenant Spine schema")
                    .with_description("The entity types of this tenant's department × industry schema, with their visible fields and relationships.")
                    .with_mime_type("application/json"),
            );
            resources.push(
                Resource::new(CAPABILITIES_URI, "capabilities")
                    .with_title("Capabilities")
                    .with_description(
                        "Every capability (with its tool, if it is one) with whether you may use it now, and which plan or scopes would unlock it.",
                    )
                    .with_mime_type("application/json"),
            );
            if caller.toolsets.contains(Toolset::Graph) {
                resources.push(
                    Resource::new(GRAPH_URI, "knowledge-graph")
                        .with_title("Knowledge Graph")
                        .with_description(
                            "Your personal knowledge graph (the graph toolset's default) with all entities and relations; subscribe to hear when it changes.",
                        )
                        .with_mime_type("application/json"),
                );
            }
        }
        Ok(ListResourcesResult::with_all_items(resources))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        let caller = self.caller(&context)?;
        let mut templates = Vec::new();
        if caller.scopes.contains(Scope::McpResources) {
            templates.push(
                ResourceTemplate::new(ENTITY_TEMPLATE, "entity")
                    .with_title("An entity")
                    .with_description("One Spine entity by canonical type and id, with the fields its type makes visible.")
                    .with_mime_type("application/json"),
            );
            templates.push(
                ResourceTemplate::new(PROJECT_SCHEMA_TEMPLATE, "project-schema")
                    .with_title("A project's schema")
                    .with_description("The Spine schema a project's records follow (the tenant's department × industry schema).")
                    .with_mime_type("application/json"),
            );
        }
        Ok(ListResourceTemplatesResult::with_all_items(templates))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let caller = self.caller(&context)?;
        let uri = request.uri.as_str();
        let not_found =
            || McpError::resource_not_found(format!("no resource {}", uri.chars().take(200).collect::<String>()), None);
        caller
            .scopes
            .require(Scope::McpResources)
            .map_err(|e| McpError::invalid_request(format!("{}: {}", e.code, e.message), None))?;
        let doc = if uri == SCHEMA_URI {
            self.services.capabilities.schema_document(&caller).await.map_err(|e| degraded(&e))?
        } else if uri == CAPABILITIES_URI {
            let (_, listed) = self.services.capabilities.list(&caller).await.map_err(|e| degraded(&e))?;
            serde_json::json!(
                listed
                    .iter()
                    .map(|l| serde_json::json!({
                        // The tool to call (none for capabilities of the capability API only).
                        "tool": crate::tools::all().find(|t| t.capability == l.spec.name).map(|t| t.name()),
                        "capability": l.spec.name,
                        "allowed": l.allowed,
                        "unlock_tier": l.unlock_tier.map(|t| t.as_str()),
                        "missing_scopes": l.missing_scopes.iter().map(|s| s.as_str()).collect::<Vec<_>>(),
                    }))
                    .collect::<Vec<_>>()
            )
        } else if uri == GRAPH_URI {
            // The graph toolset's read_graph, resolved and audited like the tool.
            let tool = crate::tools::find(&caller, "read_graph").ok_or_else(not_found)?;
            let answer = tool.call(&self.services, &caller, serde_json::json!({})).await.map_err(|e| invalid_params(&e))?;
            answer.to_value().map_err(|e| invalid_params(&e))?
        } else if let Some(rest) = uri.strip_prefix("continuity://entities/") {
            let (t, id) = rest.split_once('/').ok_or_else(not_found)?;
            let args = serde_json::json!({"type": t, "id": id});
            match self.services.capabilities.call::<services::tools::spine::EntityGet>(&caller, args).await {
                Ok((_, o)) => serde_json::to_value(o.entity).unwrap_or(Value::Null),
                Err(e) if e.code == domain::ErrorCode::NotFound => return Err(not_found()),
                Err(e) => return Err(invalid_params(&e)),
            }
        } else if let Some(project) = uri.strip_prefix("continuity://projects/").and_then(|r| r.strip_suffix("/schema")) {
            domain::Id::new(project).map_err(|_| not_found())?;
            let mut doc = self.services.capabilities.schema_document(&caller).await.map_err(|e| degraded(&e))?;
            doc["project"] = serde_json::json!(project);
            doc
        } else {
            return Err(not_found());
        };
        let text = serde_json::to_string_pretty(&doc).unwrap_or_default();
        Ok(ReadResourceResult::new(vec![ResourceContents::text(text, uri).with_mime_type("application/json")]).into())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        let caller = self.caller(&context)?;
        // Prompts read what session.get_context reads: list them when it is allowed.
        let allowed = self.services.capabilities.resolve(&caller, "session.get_context", &serde_json::json!({})).await.is_ok();
        let prompts = if allowed {
            PROMPTS
                .iter()
                .map(|(name, title, description, args)| {
                    let arguments = args
                        .iter()
                        .map(|(n, d, required)| {
                            let mut a = PromptArgument::new(*n).with_description(*d);
                            a.required = Some(*required);
                            a
                        })
                        .collect();
                    Prompt::new(*name, Some(*description), Some(arguments)).with_title(*title)
                })
                .collect()
        } else {
            Vec::new()
        };
        Ok(ListPromptsResult::with_all_items(prompts))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        let caller = self.caller(&context)?;
        let Some((_, title, _, _)) = PROMPTS.iter().find(|p| p.0 == request.name) else {
            return Err(McpError::invalid_params(
                format!("no prompt {}", request.name.chars().take(100).collect::<String>()),
                None,
            ));
        };
        let args = request.arguments.unwrap_or_default();
        let text = self.services.capabilities.prompt(&caller, &request.name, &args).await.map_err(|e| invalid_params(&e))?;
        let mut result = GetPromptResult::new(vec![PromptMessage::new_text(rmcp::model::Role::User, text)]);
        result.description = Some((*title).to_owned());
        Ok(result.into())
    }
}
