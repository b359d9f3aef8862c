//! What Continuity lists over MCP, held to the published rules of the clients people use
//! — not only to what the SDKs accept. The SDKs take any name and any schema the MCP
//! specification allows; Claude Desktop withholds every tool of a server when one name has
//! a dot, Codex drops `oneOf` (a property then reads as a string), Cursor sends only the
//! first 40 tools. A real `continuity serve` lists its tools, prompts, resources and
//! instructions for every toolset combination; each client's rules, with the source of
//! each, are [`CLIENTS`]. Where a rule is uncertain the stricter reading is taken (said
//! beside it). The toolsets `continuity setup` gives a client must fit that client.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use serde_json::{Value, json};

/// The server key `continuity setup` writes into every client's file.
const SERVER: &str = "continuity";

/// How strictly a client reads a tool's input schema.
struct SchemaRules {
    /// Refuses `oneOf`/`anyOf`/`allOf` at the schema's root.
    no_root_combinators: bool,
    /// Keywords it drops or refuses anywhere (a property then loses its meaning).
    forbidden: &'static [&'static str],
    /// Refuses `"type": ["string", "null"]`.
    no_type_arrays: bool,
    /// Every array needs `items`.
    arrays_need_items: bool,
    /// Every property needs a `type` (a missing one is read as a string).
    properties_need_type: bool,
    /// The `format` values it keeps (`None`: any).
    formats: Option<&'static [&'static str]>,
    /// The JSON Schema draft(s) it validates a schema against (and drops the tool when invalid).
    drafts: &'static [Draft],
}

#[derive(Clone, Copy, Debug)]
enum Draft {
    Draft7,
    Draft2020,
}

/// One client's published constraints.
struct Client {
    name: &'static str,
    /// The ids of `continuity setup --client` this client stands for.
    setup_ids: &'static [&'static str],
    /// The tool name as the client's model sees it.
    exposed: fn(&str) -> String,
    /// Longest exposed name.
    max_exposed: usize,
    /// What a raw tool name must match.
    name_ok: fn(&str) -> bool,
    /// Most tools it sends (per server or per request; `None`: no published limit).
    max_tools: Option<usize>,
    /// Longest tool description and server instructions it keeps whole.
    max_description: Option<usize>,
    schema: SchemaRules,
    sources: &'static [&'static str],
}

fn anthropic_name(n: &str) -> bool {
    (1..=64).contains(&n.len()) && n.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn gemini_name(n: &str) -> bool {
    // Starts with a letter or `_`, then `a-zA-Z0-9_.:-`; the stricter reading drops `.` and `:`.
    n.bytes().next().is_some_and(|b| b.is_ascii_alphabetic() || b == b'_') && anthropic_name(n)
}

fn cursor_name(n: &str) -> bool {
    // Cursor rewrote kebab-case names to snake_case: the stricter reading allows no `-`.
    anthropic_name(n) && !n.contains('-')
}

fn vscode_name(n: &str) -> bool {
    // Characters outside [a-z0-9_-] (case-insensitive) are rewritten to `_` with a warning.
    anthropic_name(n)
}

const ANTHROPIC_SCHEMA: SchemaRules = SchemaRules {
    no_root_combinators: true,
    forbidden: &["$ref"],
    no_type_arrays: false,
    arrays_need_items: false,
    properties_need_type: false,
    formats: None,
    drafts: &[Draft::Draft2020],
};

const CLIENTS: &[Client] = &[
    Client {
        name: "Claude Desktop / claude.ai",
        setup_ids: &["claude-desktop"],
        exposed: |t| t.to_owned(),
        max_exposed: 64,
        name_ok: anthropic_name,
        max_tools: None,
        max_description: None,
        schema: ANTHROPIC_SCHEMA,
        sources: &[
            "https://github.com/barryw/ImmichMCP/issues/3 (tools.N.FrontendRemoteMcpToolDefinition.name must match ^[a-zA-Z0-9_-]{1,64}$; one dotted name fails every chat)",
            "https://platform.claude.com/docs/en/agents-and-tools/tool-use/implement-tool-use (name ^[a-zA-Z0-9_-]{1,64}$; input_schema JSON Schema 2020-12)",
            "https://github.com/anthropics/claude-code/issues/5319 (oneOf/allOf/anyOf at the top level: 400)",
        ],
    },
    Client {
        name: "Claude Code",
        setup_ids: &["claude-code"],
        exposed: |t| format!("mcp__{SERVER}__{t}"),
        max_exposed: 64,
        name_ok: anthropic_name,
        max_tools: None,
        max_description: Some(2048),
        schema: ANTHROPIC_SCHEMA,
        sources: &[
            "https://github.com/anthropics/claude-code/issues/2326 (the prefixed name mcp__<server>__<tool> at most 64 characters)",
            "https://github.com/mims-harvard/ToolUniverse/issues/65 (64 passes, 65 fails)",
            "https://code.claude.com/docs/en/mcp (tool descriptions and server instructions cut at 2 KB)",
        ],
    },
    Client {
        name: "Cursor",
        setup_ids: &["cursor"],
        // Cursor counts the server's name and the tool's together.
        exposed: |t| format!("{SERVER}{t}"),
        // "Combined server and tool name length (60) exceeds 60": the stricter reading is 59.
        max_exposed: 59,
        name_ok: cursor_name,
        // Its 2025 docs: only the first 40 tools reach the agent; later builds warn above 80.
        max_tools: Some(40),
        max_description: None,
        schema: SchemaRules {
            // A third-party report (uncertain) says any oneOf/anyOf/allOf fails the request.
            no_root_combinators: true,
            forbidden: &["$ref", "oneOf", "anyOf", "allOf"],
            no_type_arrays: true,
            arrays_need_items: false,
            properties_need_type: false,
            formats: None,
            drafts: &[],
        },
        sources: &[
            "https://github.com/ComposioHQ/composio/issues/2788 (server + tool name over 60: the tool is filtered out)",
            "https://github.com/getsentry/sentry-mcp-stdio/issues/3 (docs.cursor.com: only the first 40 tools are sent)",
            "https://github.com/cursor/cursor/issues/3778 (type arrays such as [\"null\",\"string\"] broke calls)",
            "https://github.com/webflow/mcp-server/pull/13 (kebab-case names rewritten to snake_case)",
            "https://github.com/code-yeongyu/senpi/issues/952 (uncertain, third party: oneOf/anyOf/allOf refused)",
        ],
    },
    Client {
        name: "VS Code (Copilot agent mode)",
        setup_ids: &["vscode", "vscode-insiders"],
        // mcp_<slug of at most 13 characters>_<tool>, cut at 64: the longest slug is assumed.
        exposed: |t| format!("mcp_{}_{t}", "x".repeat(13)),
        max_exposed: 64,
        name_ok: vscode_name,
        max_tools: Some(128),
        max_description: None,
        schema: SchemaRules {
            no_root_combinators: false,
            forbidden: &[],
            no_type_arrays: false,
            arrays_need_items: false,
            properties_need_type: false,
            formats: None,
            // inputSchema validated against the draft-07 meta-schema; an invalid tool is dropped.
            drafts: &[Draft::Draft7],
        },
        sources: &[
            "microsoft/vscode:src/vs/workbench/contrib/mcp/common/mcpServer.ts (toolInvalidCharRe /[^a-z0-9_-]/gi, draft-07 validation, id sliced to 64)",
            "microsoft/vscode:src/vs/workbench/contrib/mcp/common/mcpTypes.ts (McpToolName: prefix mcp_, MaxPrefixLen 18, MaxLength 64)",
            "microsoft/vscode-copilot-chat:src/platform/configuration/common/configurationService.ts (HARD_TOOL_LIMIT = 128)",
        ],
    },
    Client {
        name: "Windsurf",
        setup_ids: &["windsurf"],
        exposed: |t| format!("mcp0_{t}"),
        max_exposed: 64,
        name_ok: anthropic_name,
        max_tools: Some(100),
        max_description: None,
        schema: SchemaRules {
            no_root_combinators: false,
            forbidden: &[],
            no_type_arrays: false,
            arrays_need_items: true,
            properties_need_type: false,
            formats: None,
            drafts: &[],
        },
        sources: &[
            "https://docs.windsurf.com/windsurf/cascade/mcp (Cascade: at most 100 tools in all)",
            "https://github.com/DaxianLee/cocos-mcp-server/issues/14 (\"array schema missing items\"; names shown as mcp<N>_<tool>)",
        ],
    },
    Client {
        name: "Codex CLI / OpenAI function calling",
        setup_ids: &["codex"],
        exposed: |t| format!("mcp__{SERVER}__{t}"),
        // Longer names are cut to 24 characters and a SHA-1: unreadable for the model.
        max_exposed: 64,
        name_ok: anthropic_name,
        // The OpenAI API: at most 128 functions in a request.
        max_tools: Some(128),
        max_description: None,
        schema: SchemaRules {
            no_root_combinators: true,
            // Codex keeps type, description, enum, items, properties, required,
            // additionalProperties and anyOf; everything else is dropped. A dropped
            // `oneOf` or `$ref` leaves a property of no type, which it reads as a string.
            forbidden: &["$ref", "$defs", "oneOf", "allOf", "const", "not", "if", "then", "else"],
            no_type_arrays: false,
            arrays_need_items: true,
            properties_need_type: true,
            formats: None,
            drafts: &[],
        },
        sources: &[
            "openai/codex:codex-rs/core/src/mcp_connection_manager.rs (sanitize_responses_api_tool_name, MAX_TOOL_NAME_LENGTH 64, SHA-1 suffix)",
            "openai/codex:codex-rs/tools/src/json_schema.rs (the kept subset of JSON Schema)",
            "OpenAI API reference: function name ^[a-zA-Z0-9_-]{1,64}$, at most 128 functions",
        ],
    },
    Client {
        name: "Gemini CLI",
        setup_ids: &["gemini"],
        exposed: |t| format!("mcp_{SERVER}_{t}"),
        // 64 - 1 "to be safe" in its source; longer names are cut in the middle.
        max_exposed: 63,
        name_ok: gemini_name,
        max_tools: None,
        max_description: None,
        schema: SchemaRules {
            no_root_combinators: true,
            // The Gemini API's `parameters` subset refuses `const`; `format` only enum/date-time.
            forbidden: &["$ref", "const", "if", "then", "else"],
            no_type_arrays: false,
            arrays_need_items: false,
            properties_need_type: false,
            formats: Some(&["enum", "date-time"]),
            drafts: &[],
        },
        sources: &[
            "google-gemini/gemini-cli:packages/core/src/tools/mcp-tool.ts (generateValidName: mcp_<server>_<tool>, 63 characters)",
            "https://github.com/zed-industries/zed/issues/45552 (Gemini: Unknown name \"const\")",
            "https://firebase.google.com/docs/reference/js/ai.schemashared (format: enum or date-time only)",
        ],
    },
    Client {
        name: "Zed",
        setup_ids: &["zed"],
        exposed: |t| t.to_owned(),
        max_exposed: 64,
        name_ok: anthropic_name,
        max_tools: None,
        max_description: None,
        schema: SchemaRules {
            no_root_combinators: false,
            // With Gemini models a tool using $ref or if/then/else is not sent; format and
            // additionalProperties are stripped.
            forbidden: &["$ref", "if", "then", "else"],
            no_type_arrays: false,
            arrays_need_items: false,
            properties_need_type: false,
            formats: Some(&[]),
            drafts: &[],
        },
        sources: &[
            "zed-industries/zed:crates/language_model/src/tool_schema.rs (adapt_schema_to_format: Gemini refuses $ref and if/then/else, strips format)",
            "https://github.com/zed-industries/zed/pull/60154 (names sanitised for Anthropic/OpenAI: ^[a-zA-Z0-9_-]{1,64}$)",
        ],
    },
];

/// Every way one schema breaks `rules` (empty: it passes).
fn schema_faults(schema: &Value, rules: &SchemaRules) -> Vec<String> {
    let mut faults = Vec::new();
    if rules.no_root_combinators {
        for k in ["oneOf", "anyOf", "allOf"] {
            if schema.get(k).is_some() {
                faults.push(format!("{k} at the root"));
            }
        }
    }
    if schema["type"] != "object" {
        faults.push("the root is not an object".into());
    }
    walk(schema, "", rules, &mut faults);
    for draft in rules.drafts {
        let valid = match draft {
            Draft::Draft7 => jsonschema::draft7::meta::is_valid(schema),
            Draft::Draft2020 => jsonschema::draft202012::meta::is_valid(schema),
        };
        if !valid {
            faults.push(format!("not a valid {draft:?} schema"));
        }
    }
    faults
}

fn walk(s: &Value, at: &str, rules: &SchemaRules, faults: &mut Vec<String>) {
    let Some(o) = s.as_object() else { return };
    for k in rules.forbidden {
        if o.contains_key(*k) {
            faults.push(format!("{at}: {k}"));
        }
    }
    if rules.no_type_arrays && o.get("type").is_some_and(Value::is_array) {
        faults.push(format!("{at}: a type array"));
    }
    if rules.arrays_need_items && o.get("type") == Some(&json!("array")) && !o.contains_key("items") {
        faults.push(format!("{at}: an array without items"));
    }
    if let (Some(allowed), Some(f)) = (rules.formats, o.get("format").and_then(Value::as_str))
        && !allowed.contains(&f)
    {
        faults.push(format!("{at}: format {f}"));
    }
    if let Some(props) = o.get("properties").and_then(Value::as_object) {
        for (name, p) in props {
            if rules.properties_need_type && p.get("type").is_none() {
                faults.push(format!("{at}/{name}: no type"));
            }
            walk(p, &format!("{at}/{name}"), rules, faults);
        }
    }
    for k in ["items", "additionalProperties"] {
        if let Some(child) = o.get(k) {
            walk(child, &format!("{at}/{k}"), rules, faults);
        }
    }
    for k in ["oneOf", "anyOf", "allOf"] {
        for (i, child) in o.get(k).and_then(Value::as_array).into_iter().flatten().enumerate() {
            walk(child, &format!("{at}/{k}/{i}"), rules, faults);
        }
    }
}

/// The capability names (dotted) of the MCP tools.
fn adk_capabilities() -> Vec<String> {
    mcp::tools::all().map(|t| t.capability.to_owned()).collect()
}

/// The toolset combinations a key can be offered.
const TOOLSETS: &[&str] = &[
    "canonical",
    "graph",
    "engineering",
    "canonical,graph",
    "canonical,engineering",
    "graph,engineering",
    "canonical,graph,engineering",
];

const ALL_SCOPES: &str = "mcp:tools mcp:resources tenant:read tenant:write memory:read memory:write";

async fn list(base: &str, key: &str, method: &str) -> Value {
    let resp = common::rpc(base, Some(key), json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": {}})).await;
    assert_eq!(resp.status(), 200, "{method}");
    let v: Value = resp.json().await.unwrap();
    v["result"].clone()
}

/// Every tool, prompt and resource `continuity serve` lists, for every toolset
/// combination and every scope on the top plan, against every client's rules.
#[tokio::test]
async fn every_listing_passes_every_clients_published_rules() {
    let dir = tempfile::tempdir().unwrap();
    let server = common::spawn(&dir.path().join("home"));
    let init = common::rpc(
        &server.base,
        Some(&server.key),
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
               "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "compat", "version": "1"}}}),
    )
    .await;
    // `initialize` opens a session: its answer comes as a server-sent event.
    let body = init.text().await.unwrap();
    let init: Value = body
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .find_map(|d| serde_json::from_str(d.trim()).ok())
        .unwrap_or_else(|| serde_json::from_str(&body).unwrap_or_else(|_| panic!("{body}")));
    let instructions = init["result"]["instructions"].as_str().unwrap_or_else(|| panic!("{init}")).to_owned();
    let mut faults: Vec<String> = Vec::new();
    let mut counts = std::collections::BTreeMap::new();
    for toolsets in TOOLSETS {
        let out = common::cli(
            &server.home,
            &["key", "create", "--tenant", "local", "--scopes", ALL_SCOPES, "--toolsets", toolsets, "--principal", "owner"],
        );
        let key = out.trim().to_owned();
        let tools = list(&server.base, &key, "tools/list").await["tools"].as_array().unwrap().clone();
        let prompts = list(&server.base, &key, "prompts/list").await["prompts"].as_array().unwrap().clone();
        let resources = list(&server.base, &key, "resources/list").await["resources"].as_array().unwrap().clone();
        let templates =
            list(&server.base, &key, "resources/templates/list").await["resourceTemplates"].as_array().unwrap().clone();
        assert!(!tools.is_empty(), "{toolsets}: no tools listed");
        counts.insert(*toolsets, tools.len());
        for client in CLIENTS {
            let mut fault = |what: String| faults.push(format!("{} [{toolsets}]: {what}", client.name));
            for t in &tools {
                let name = t["name"].as_str().unwrap();
                if !(client.name_ok)(name) {
                    fault(format!("tool name {name:?}"));
                }
                let exposed = (client.exposed)(name);
                if exposed.len() > client.max_exposed {
                    fault(format!("{exposed:?} is {} characters, more than {}", exposed.len(), client.max_exposed));
                }
                let description = t["description"].as_str().unwrap_or_default();
                if description.is_empty() {
                    fault(format!("{name}: no description"));
                }
                if let Some(max) = client.max_description
                    && description.len() > max
                {
                    fault(format!("{name}: a description of {} bytes, more than {max}", description.len()));
                }
                for f in schema_faults(&t["inputSchema"], &client.schema) {
                    fault(format!("{name} inputSchema {f}"));
                }
                // Results are not shown to the model's function declaration, but SDK
                // clients validate them: a valid 2020-12 object schema without $ref.
                let output = &t["outputSchema"];
                if output["type"] != "object"
                    || !jsonschema::draft202012::meta::is_valid(output)
                    || output.to_string().contains("\"$ref\"")
                {
                    fault(format!("{name}: outputSchema is not a plain valid object schema"));
                }
            }
            for p in &prompts {
                // Claude Code offers prompts as /mcp__<server>__<prompt>, VS Code as <server>.<prompt>.
                let name = p["name"].as_str().unwrap();
                if !(client.name_ok)(name) || (client.exposed)(name).len() > client.max_exposed {
                    fault(format!("prompt name {name:?}"));
                }
            }
            for r in resources.iter().chain(&templates) {
                let name = r["name"].as_str().unwrap();
                if !anthropic_name(name) {
                    fault(format!("resource name {name:?}"));
                }
            }
            if let Some(max) = client.max_description
                && instructions.len() > max
            {
                fault(format!("server instructions of {} bytes, more than {max}", instructions.len()));
            }
        }
    }
    // A configuration written for the dotted names of earlier versions keeps working.
    let by_tool =
        common::call_tool(&server.base, &server.key, "spine_entity_get", json!({"type": "account", "id": "nope"})).await;
    let by_capability =
        common::call_tool(&server.base, &server.key, "spine.entity.get", json!({"type": "account", "id": "nope"})).await;
    assert_eq!(by_tool["structuredContent"]["code"], "NOT_FOUND", "{by_tool}");
    assert_eq!(by_capability, by_tool);
    let unknown = common::call_tool(&server.base, &server.key, "spine_entity_gets", json!({})).await;
    assert_eq!(unknown["structuredContent"]["code"], "CAPABILITY_NOT_FOUND", "{unknown}");
    // An agent is never told to call a name it does not have: no listing, schema,
    // instruction or prompt names a tool by its dotted capability name.
    let dotted: Vec<String> = adk_capabilities().into_iter().filter(|c| c.contains('.')).collect();
    let mut told = vec![("instructions".to_owned(), instructions.clone())];
    for toolsets in TOOLSETS {
        let out =
            common::cli(&server.home, &["key", "create", "--tenant", "local", "--scopes", ALL_SCOPES, "--toolsets", toolsets]);
        let key = out.trim().to_owned();
        for method in ["tools/list", "prompts/list", "resources/list", "resources/templates/list"] {
            told.push((format!("{method} [{toolsets}]"), list(&server.base, &key, method).await.to_string()));
        }
    }
    for prompt in
        [json!({"name": "morning_brief"}), json!({"name": "project_handoff_summary", "arguments": {"project": "apollo"}})]
    {
        let r = common::rpc(
            &server.base,
            Some(&server.key),
            json!({"jsonrpc": "2.0", "id": 2, "method": "prompts/get", "params": prompt}),
        )
        .await;
        told.push((format!("prompts/get {prompt}"), r.text().await.unwrap()));
    }
    for (what, text) in &told {
        for d in &dotted {
            // A dotted name followed by a word character is something else (`memory.search_org` vs `memory.search`).
            let named = text.match_indices(d.as_str()).any(|(i, _)| {
                let before = text[..i].chars().next_back();
                let after = text[i + d.len()..].chars().next();
                !before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '.')
                    && !after.is_some_and(|c| c.is_alphanumeric() || c == '_')
            });
            assert!(!named, "{what} names the tool {d} by its capability name");
        }
    }

    // The toolsets `continuity setup` gives each client fit that client's tool limit.
    for setup in continuity::setup::clients::CLIENTS {
        let rules =
            CLIENTS.iter().find(|c| c.setup_ids.contains(&setup.id)).unwrap_or_else(|| panic!("no rules for {}", setup.id));
        let n = counts[setup.toolsets];
        if let Some(max) = rules.max_tools {
            assert!(n <= max, "setup offers {} the toolsets {} ({n} tools), more than its {max}", setup.id, setup.toolsets);
        }
    }
    for c in CLIENTS {
        assert!(!c.sources.is_empty(), "{}: every rule has its source", c.name);
    }
    assert!(faults.is_empty(), "{} faults:\n{}", faults.len(), faults.join("\n"));
}

/// The rules catch what they are meant to catch (a checker that passes everything proves nothing).
#[test]
fn the_rules_refuse_what_the_clients_refuse() {
    let desktop = &CLIENTS[0];
    assert!(!(desktop.name_ok)("memory.search") && (desktop.name_ok)("memory_search"));
    let code = &CLIENTS[1];
    assert_eq!((code.exposed)("memory_search"), "mcp__continuity__memory_search");
    assert!((code.exposed)(&"x".repeat(48)).len() > code.max_exposed);
    let codex = CLIENTS.iter().find(|c| c.name.starts_with("Codex")).unwrap();
    let tagged = json!({"type": "object", "properties": {"record": {"oneOf": [{"type": "object", "properties": {"kind": {"const": "a"}}}]}}});
    assert!(schema_faults(&tagged, &codex.schema).iter().any(|f| f.contains("oneOf")));
    assert!(schema_faults(&tagged, &codex.schema).iter().any(|f| f.contains("no type")));
    let cursor = CLIENTS.iter().find(|c| c.name == "Cursor").unwrap();
    let nullable = json!({"type": "object", "properties": {"a": {"type": ["string", "null"]}}});
    assert!(!schema_faults(&nullable, &cursor.schema).is_empty());
    let windsurf = CLIENTS.iter().find(|c| c.name == "Windsurf").unwrap();
    assert!(!schema_faults(&json!({"type": "object", "properties": {"a": {"type": "array"}}}), &windsurf.schema).is_empty());
    let vscode = CLIENTS.iter().find(|c| c.name.starts_with("VS Code")).unwrap();
    assert!(!schema_faults(&json!({"type": "object", "properties": {"a": {"type": 7}}}), &vscode.schema).is_empty());
    assert!(schema_faults(&json!({"type": "object", "properties": {"a": {"type": "string"}}}), &vscode.schema).is_empty());
}
