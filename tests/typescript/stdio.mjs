// The official MCP TypeScript SDK's stdio client, with its defaults, against the entry
// `continuity setup` writes for Claude Desktop: `continuity stdio --home HOME` with the
// key in CONTINUITY_KEY (which attaches to the home's running `serve`).
// Prints one JSON line; exits non-zero on any failure.
//
// Usage: node stdio.mjs CONTINUITY_BINARY HOME   (NODE_PATH must reach the SDK)
import { createRequire } from "node:module";

const require = createRequire(import.meta.url + "/../");
const resolve = (m) => require.resolve(m, { paths: (process.env.NODE_PATH || "").split(":") });
const { Client } = await import(resolve("@modelcontextprotocol/sdk/client/index.js"));
const { StdioClientTransport } = await import(resolve("@modelcontextprotocol/sdk/client/stdio.js"));

const [bin, home] = process.argv.slice(2);
const client = new Client({ name: "continuity-ts-stdio", version: "1.0.0" });
const transport = new StdioClientTransport({
  command: bin,
  args: ["stdio", "--home", home],
  env: { CONTINUITY_KEY: process.env.CONTINUITY_KEY, PATH: process.env.PATH || "" },
});
await client.connect(transport);
const seen = { protocol_version: transport.protocolVersion ?? null };
seen.server = client.getServerVersion()?.name;
seen.tools = (await client.listTools()).tools.map((t) => t.name);
const remembered = await client.callTool({ name: "memory_remember", arguments: { text: "Remembered through the TypeScript SDK over stdio" } });
if (remembered.isError) throw new Error(JSON.stringify(remembered));
const found = await client.callTool({ name: "memory_search", arguments: { query: "TypeScript SDK over stdio" } });
if (found.isError || found.structuredContent.count < 1) throw new Error(JSON.stringify(found));
await client.close();
console.log(JSON.stringify(seen));
