// A scripted session of the official MCP TypeScript SDK (@modelcontextprotocol/sdk)
// against `continuity serve`: connect with an API key, list the tools, call every tool
// with valid arguments (the SDK validates structured results against output schemas),
// then one invalid call. Prints one JSON line; exits non-zero on any failure.
//
// Usage: node session.mjs MCP_URL API_KEY   (NODE_PATH must reach the SDK)
import { createRequire } from "node:module";

const require = createRequire(import.meta.url + "/../");
const resolve = (m) => require.resolve(m, { paths: (process.env.NODE_PATH || "").split(":") });
const { Client } = await import(resolve("@modelcontextprotocol/sdk/client/index.js"));
const { StreamableHTTPClientTransport } = await import(resolve("@modelcontextprotocol/sdk/client/streamableHttp.js"));

const [url, key] = process.argv.slice(2);
const calls = [
  ["memory_write_conversational", { session: "ts", role: "user", content: "How do Acme renewals work?" }],
  ["memory_read_conversational", { session: "ts" }],
  ["memory_search_org", { query: "acme renewals" }],
  ["memory_read_org", { id: "dec-1" }],
  ["memory_propose", { title: "Acme renewals need the CRO too", body: "From 2027 the CRO signs as well.", kind: "decision" }],
  ["memory_read_personal", {}],
  ["memory_remember", { text: "Prefers renewal summaries as bullet points" }],
  ["memory_search", { query: "Acme renewals" }],
  ["memory_list_decisions", {}],
  ["session_get_context", { entity: { type: "account", id: "acme-1" }, session: "ts" }],
  ["session_summarize", { session: "ts" }],
  ["session_list_recent", {}],
  ["spine_entity_get", { type: "account", id: "acme-1" }],
  ["spine_entity_search", { query: "acme" }],
  ["spine_relationship_list", { type: "account", id: "acme-1" }],
  ["signal_list", { entity: { type: "account", id: "acme-1" } }],
  ["signal_get", { id: "sig-1" }],
  ["proposal_create", { title: "Offer Acme a renewal discount", body: "Their health dropped." }],
  ["proposal_status", { id: "placeholder" }],
  ["book_list", { project: "apollo" }],
  ["kb_search", { query: "refund" }],
  ["playbook_handoff", { goal: "Renew Acme", entity: { type: "account", id: "acme-1" } }],
];

const client = new Client({ name: "continuity-ts-test", version: "1.0.0" });
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${key}` } },
});
await client.connect(transport);
const seen = { called: [], errors: [] };
seen.tools = (await client.listTools()).tools.map((t) => t.name);
let proposalId = null;
for (const [name, args0] of calls) {
  const args = name === "proposal_status" ? { id: proposalId } : args0;
  const result = await client.callTool({ name, arguments: args });
  if (result.isError) seen.errors.push({ tool: name, content: result.content });
  if (name === "memory_propose") proposalId = result.structuredContent.proposal.id;
  seen.called.push(name);
}
const bad = await client.callTool({ name: "spine_entity_get", arguments: { type: "account" } });
seen.invalid_call = { isError: bad.isError, code: bad.structuredContent?.code };
seen.prompts = (await client.listPrompts()).prompts.map((p) => p.name);
await client.close();
console.log(JSON.stringify(seen));
