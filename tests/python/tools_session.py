"""A scripted session of the official MCP Python SDK against `continuity serve`: connect
with an API key, list the tools, call every tool with valid arguments (the SDK validates
each structured result against the tool's output schema), then one invalid call.

Usage: tools_session.py MCP_URL API_KEY
Prints one JSON line of observations; exits non-zero on any failure.
"""

import json
import sys

import anyio
import httpx2
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

URL, KEY = sys.argv[1:3]

CALLS = [
    ("memory_write_conversational", {"session": "sdk", "role": "user", "content": "How do Acme renewals work?"}),
    ("memory_write_conversational", {"session": "sdk", "role": "assistant", "content": "The CFO signs above 50k."}),
    ("memory_read_conversational", {"session": "sdk"}),
    ("memory_search_org", {"query": "acme renewals"}),
    ("memory_read_org", {"id": "dec-1"}),
    ("memory_propose", {"title": "Acme renewals need the CRO too", "body": "From 2027 the CRO signs as well.", "kind": "decision", "supersedes": "dec-1"}),
    ("memory_read_personal", {}),
    ("memory_remember", {"text": "Prefers renewal summaries as bullet points"}),
    ("memory_search", {"query": "Acme renewals"}),
    ("memory_list_decisions", {}),
    ("session_get_context", {"entity": {"type": "account", "id": "acme-1"}, "session": "sdk"}),
    ("session_summarize", {"session": "sdk"}),
    ("session_list_recent", {}),
    ("spine_entity_get", {"type": "account", "id": "acme-1"}),
    ("spine_entity_search", {"query": "acme"}),
    ("spine_relationship_list", {"type": "account", "id": "acme-1"}),
    ("signal_list", {"entity": {"type": "account", "id": "acme-1"}}),
    ("signal_get", {"id": "sig-1"}),
    ("proposal_create", {"title": "Offer Acme a renewal discount", "body": "Their health dropped."}),
    ("book_list", {"project": "apollo"}),
    ("kb_search", {"query": "refund"}),
    ("playbook_handoff", {"goal": "Renew Acme", "entity": {"type": "account", "id": "acme-1"}}),
]


async def main():
    seen = {"called": [], "errors": []}
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {KEY}"}, timeout=30) as http:
        async with streamable_http_client(URL, http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                init = await session.initialize()
                seen["protocol_version"] = init.protocol_version
                tools = (await session.list_tools()).tools
                seen["tools"] = [t.name for t in tools]
                for name, args in CALLS:
                    result = await session.call_tool(name, args)
                    if result.is_error:
                        seen["errors"].append({"tool": name, "content": [c.model_dump() for c in result.content]})
                    seen["called"].append(name)
                missing = await session.call_tool("proposal_status", {"id": "missing"})
                seen["status_of_missing"] = missing.structured_content
                bad = await session.call_tool("spine_entity_get", {"type": "account"})
                seen["invalid_call"] = {"isError": bad.is_error, "structured": bad.structured_content}
                prompts = (await session.list_prompts()).prompts
                seen["prompts"] = [p.name for p in prompts]
                brief = await session.get_prompt("morning_brief", {})
                seen["brief_mentions_signal"] = "health_dropped" in brief.messages[0].content.text
                resource = await session.read_resource("continuity://entities/account/acme-1")
                seen["resource_entity_name"] = json.loads(resource.contents[0].text)["attributes"]["name"]
    print(json.dumps(seen))


anyio.run(main)
