"""The official MCP Python SDK against `continuity serve`, headless.

authorization_code: 401 -> protected-resource metadata -> AS metadata -> dynamic client
registration -> the authorize URL is fetched and our login and consent forms are
posted like a browser would -> token with PKCE -> tools/list -> a forced refresh ->
tools/list again. Then client_credentials with a pre-created confidential client.

Usage: oauth_client.py MCP_URL TENANT EMAIL PASSWORD CLIENT_ID CLIENT_SECRET
Prints one JSON line of observations; exits non-zero on any failure.
"""

import json
import sys
import time

import anyio
import httpx2
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientMetadata
from sdk_support import MemoryStorage, sign_in_and_allow

URL, TENANT, EMAIL, PASSWORD, CC_ID, CC_SECRET = sys.argv[1:7]
ISSUER = URL[: -len("/mcp")] + "/"  # a root issuer, rendered with its slash
REDIRECT = "http://127.0.0.1:9/callback"  # never contacted: the redirect is captured
seen = {"requests": []}


got = {}


async def redirect_handler(authorize_url: str) -> None:
    """A browser: open the login page, sign in, allow, capture the redirect."""

    async def wrong_password_first(page, form_url, form):
        assert page.headers.get("x-frame-options") == "DENY"
        # A wrong password first: the page says so and nothing is granted.
        wrong = await browser.post(form_url, data={**form, "action": "login", "tenant": TENANT, "email": EMAIL,
                                                   "password": "not the password"})
        assert wrong.status_code == 200 and "Unknown workspace" in wrong.text, wrong.text[:300]

    async with httpx2.AsyncClient(follow_redirects=False, timeout=30) as browser:
        got.update(await sign_in_and_allow(browser, authorize_url, TENANT, EMAIL, PASSWORD, wrong_password_first))


async def callback_handler() -> AuthorizationCodeResult:
    return AuthorizationCodeResult(**got)


async def log_request(request):
    seen["requests"].append(f"{request.method} {request.url.path}")


async def authorization_code():
    storage = MemoryStorage()
    provider = OAuthClientProvider(
        server_url=URL,
        client_metadata=OAuthClientMetadata(client_name="python-sdk-test", redirect_uris=[REDIRECT],
                                            grant_types=["authorization_code", "refresh_token"],
                                            token_endpoint_auth_method="none"),
        storage=storage,
        redirect_handler=redirect_handler,
        callback_handler=callback_handler,
    )
    async with httpx2.AsyncClient(auth=provider, timeout=30, event_hooks={"request": [log_request]}) as http:
        async with streamable_http_client(URL, http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                tools = [t.name for t in (await session.list_tools()).tools]
                first_access = storage.tokens.access_token
                first_refresh = storage.tokens.refresh_token
                # Force the SDK's proactive refresh.
                provider.context.token_expiry_time = time.time() - 1
                again = [t.name for t in (await session.list_tools()).tools]
                assert storage.tokens.access_token != first_access, "the access token was not refreshed"
                assert storage.tokens.refresh_token != first_refresh, "the refresh token was not rotated"
    seen["code_flow_tools"] = tools
    seen["code_flow_tools_after_refresh"] = again
    seen["scope"] = storage.tokens.scope
    seen["old_refresh_token"] = first_refresh
    seen["client_id"] = storage.client.client_id


async def client_credentials():
    provider = ClientCredentialsOAuthProvider(server_url=URL, storage=MemoryStorage(), client_id=CC_ID,
                                              client_secret=CC_SECRET, token_endpoint_auth_method="client_secret_basic",
                                              issuer=ISSUER)
    async with httpx2.AsyncClient(auth=provider, timeout=30) as http:
        async with streamable_http_client(URL, http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                seen["client_credentials_tools"] = [t.name for t in (await session.list_tools()).tools]


async def main():
    await authorization_code()
    await client_credentials()
    print(json.dumps(seen))


anyio.run(main)
