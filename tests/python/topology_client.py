"""The official MCP Python SDK against the emulated API Gateway of the topology test.

A person signs in through the SDK's OAuth flow (401 -> resource metadata -> AS metadata
-> dynamic client registration -> our sign-in and consent pages, posted like a browser
-> token with PKCE), then, as their agent would: spine.entity.search, kb.search,
memory.propose. It prints one JSON line and waits for a line on stdin (the test
approves the proposal meanwhile), then memory.search_org and proposal.status, and
prints a second JSON line. Exits non-zero on any failure.

Usage: topology_client.py MCP_URL TENANT EMAIL PASSWORD ENTITY_QUERY KB_QUERY
"""

import json
import sys

import anyio
import httpx2
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientMetadata
from sdk_support import MemoryStorage, sign_in_and_allow

URL, TENANT, EMAIL, PASSWORD, ENTITY_QUERY, KB_QUERY = sys.argv[1:7]
REDIRECT = "http://127.0.0.1:9/callback"  # never contacted: the redirect is captured
PROPOSAL = {
    "title": "Renewal call timing",
    "body": "Maybe renewal calls should happen a quarter before the contract ends, not a month before.",
    "kind": "decision",
}


got = {}
seen = {"requests": []}


async def redirect_handler(authorize_url: str) -> None:
    """A browser: open the sign-in page, sign in, allow, capture the redirect."""
    async with httpx2.AsyncClient(follow_redirects=False, timeout=30) as browser:
        got.update(await sign_in_and_allow(browser, authorize_url, TENANT, EMAIL, PASSWORD))


async def callback_handler() -> AuthorizationCodeResult:
    return AuthorizationCodeResult(**got)


async def log_request(request):
    seen["requests"].append(f"{request.method} {request.url.path}")


async def call(session, name, args):
    result = await session.call_tool(name, args)
    assert not result.is_error, (name, [c.model_dump() for c in result.content])
    return result.structured_content


async def main():
    storage = MemoryStorage()
    provider = OAuthClientProvider(
        server_url=URL,
        client_metadata=OAuthClientMetadata(client_name="topology-test", redirect_uris=[REDIRECT],
                                            grant_types=["authorization_code", "refresh_token"],
                                            token_endpoint_auth_method="none"),
        storage=storage,
        redirect_handler=redirect_handler,
        callback_handler=callback_handler,
    )
    async with httpx2.AsyncClient(auth=provider, timeout=60, event_hooks={"request": [log_request]}) as http:
        async with streamable_http_client(URL, http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                seen["tools"] = [t.name for t in (await session.list_tools()).tools]
                seen["scope"] = storage.tokens.scope
                seen["entities"] = await call(session, "spine_entity_search", {"query": ENTITY_QUERY})
                seen["kb"] = await call(session, "kb_search", {"query": KB_QUERY})
                seen["proposed"] = await call(session, "memory_propose", PROPOSAL)
                print(json.dumps(seen), flush=True)
                # The test approves it in the console, then says so.
                line = await anyio.to_thread.run_sync(sys.stdin.readline)
                assert line.strip() == "approved", line
                after = {
                    "org": await call(session, "memory_search_org", {"query": "renewal calls quarter"}),
                    "status": await call(session, "proposal_status", {"id": seen["proposed"]["proposal"]["id"]}),
                }
                print(json.dumps(after), flush=True)


anyio.run(main)
