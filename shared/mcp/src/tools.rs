//! The MCP tools: every capability the services register ([`services::for_each_capability!`])
//! that the ADK puts on an MCP channel, with its typed handler and the text rendering of
//! its result ([`crate::render::Render`] — a result type without one does not compile).
//! Who may call what (plan tier, scopes, toolset, connectors) is each capability's policy
//! (`Capability::SPEC`), resolved by the ADK.

use domain::principal::{CallerContext, Toolset};
use domain::{Error, Result};
use serde_json::Value;
use services::Services;
use services::capabilities::typed::{BoxFuture, Capability, ToolName, input_schema, output_schema};

use crate::render::Render;

/// A tool's type-erased handler: its answer, still typed.
type Handler = for<'a> fn(&'a Services, &'a CallerContext, Value) -> BoxFuture<'a, Result<Answer>>;

/// A tool's answer: the text for a model, and its structured content still typed, so
/// a response is written from it once — as rmcp's JSON tree for a result rmcp serializes,
/// or straight into the body on the fast path — never built as a tree and serialized again.
pub struct Answer {
    pub text: String,
    structured: Box<dyn Structured>,
}

impl Answer {
    /// An answer of `text` and the typed `structured` content.
    pub fn new<T: serde::Serialize + Send + 'static>(text: String, structured: T) -> Self {
        Self { text, structured: Box::new(structured) }
    }

    /// The structured content as a JSON tree (rmcp's `CallToolResult` holds one).
    ///
    /// # Errors
    /// `INTERNAL` when the output does not serialize (it always does: it is our type).
    pub fn to_value(&self) -> Result<Value> {
        self.structured.to_value().map_err(|e| Error::internal(format!("a tool's answer: {e}")))
    }

    /// Writes the structured content as JSON to `out`.
    ///
    /// # Errors
    /// `INTERNAL` when the output does not serialize.
    pub fn write_structured(&self, out: &mut Vec<u8>) -> Result<()> {
        self.structured.write(out).map_err(|e| Error::internal(format!("a tool's answer: {e}")))
    }
}

/// A capability's output, serializable either way.
trait Structured: Send {
    fn to_value(&self) -> serde_json::Result<Value>;
    fn write(&self, out: &mut Vec<u8>) -> serde_json::Result<()>;
}

impl<T: serde::Serialize + Send> Structured for T {
    fn to_value(&self) -> serde_json::Result<Value> {
        serde_json::to_value(self)
    }
    fn write(&self, out: &mut Vec<u8>) -> serde_json::Result<()> {
        serde_json::to_writer(out, self)
    }
}

/// One MCP tool.
pub struct McpTool {
    /// The tool's name on the wire: the capability's with `_` for `.` (the graph
    /// toolset keeps the reference server's).
    name: ToolName,
    /// The capability it stands for.
    pub capability: &'static str,
    /// The capability's policy.
    spec: adk::CapabilitySpec,
    pub title: &'static str,
    pub description: &'static str,
    pub input_schema: fn() -> Value,
    pub output_schema: fn() -> Value,
    call: Handler,
}

impl McpTool {
    /// Its name on the wire (`memory_search`).
    pub fn name(&'static self) -> &'static str {
        self.name.as_str()
    }

    /// Whether a `tools/call` for `name` means this tool: its tool name, or the dotted
    /// capability name earlier versions listed (configurations written then keep working).
    pub fn answers_to(&'static self, name: &str) -> bool {
        self.name() == name || self.capability == name
    }

    /// The toolset it belongs to.
    pub fn toolset(&self) -> Toolset {
        self.spec.toolset
    }

    /// Whether it writes (for the `readOnlyHint` annotation).
    pub fn read_only(&self) -> bool {
        self.spec.read_only
    }

    /// Runs it for `caller` (resolved and audited by the capability service): the
    /// structured result and its text for a model.
    ///
    /// # Errors
    /// The capability's taxonomy error.
    pub async fn call(&self, services: &Services, caller: &CallerContext, args: Value) -> Result<Answer> {
        (self.call)(services, caller, args).await
    }
}

fn call<'a, C>(services: &'a Services, caller: &'a CallerContext, args: Value) -> BoxFuture<'a, Result<Answer>>
where
    C: Capability,
    C::Output: Render,
{
    Box::pin(async move {
        let (_, out) = services.capabilities.call::<C>(caller, args).await?;
        let text = out.render();
        Ok(Answer::new(text, out))
    })
}

const fn tool<C>() -> McpTool
where
    C: Capability,
    C::Output: Render,
{
    McpTool {
        name: C::TOOL,
        capability: C::NAME,
        spec: C::SPEC,
        title: C::TITLE,
        description: C::DESCRIPTION,
        input_schema: input_schema::<C::Args>,
        output_schema: output_schema::<C::Output>,
        call: call::<C>,
    }
}

macro_rules! mcp_tools {
    ($($c:path),* $(,)?) => {
        /// Every registered capability, in registration order.
        static REGISTERED: &[McpTool] = &[$(tool::<$c>()),*];
    };
}

services::for_each_capability!(mcp_tools);

/// The MCP tools, in registration order: the canonical tools of SPEC §7.1, then the
/// `graph` toolset, then the `engineering` toolset (capabilities of the capability API
/// only are not tools).
pub fn all() -> impl Iterator<Item = &'static McpTool> {
    REGISTERED.iter().filter(|t| t.spec.channel != adk::Channel::Api)
}

/// The tool `name` (its tool name or its capability name) in `caller`'s toolsets, if any.
pub fn find(caller: &CallerContext, name: &str) -> Option<&'static McpTool> {
    all().find(|t| t.answers_to(name) && caller.toolsets.contains(t.toolset()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_capability_off_the_api_channel_is_a_tool_with_schemas() {
        use services::capabilities::typed::REGISTRY;
        for e in REGISTRY.iter().filter(|e| e.spec.channel != adk::Channel::Api) {
            let t = all().find(|t| t.capability == e.name).unwrap_or_else(|| panic!("{} is not an MCP tool", e.name));
            assert_eq!((t.name(), t.toolset()), (e.tool(), e.spec.toolset));
            assert_eq!((t.input_schema)()["type"], "object");
            assert_eq!((t.output_schema)()["type"], "object");
        }
        for t in all() {
            assert!(REGISTRY.iter().any(|e| e.name == t.capability && e.spec.channel != adk::Channel::Api), "{}", t.capability);
        }
    }
}
