"""The official MCP Python SDK's stdio client, with its defaults, against the entry
`continuity setup` writes for Claude Desktop: `continuity stdio --home HOME` with the key
in CONTINUITY_KEY (which attaches to the home's running `serve`).

Usage: stdio_session.py CONTINUITY_BINARY HOME   (CONTINUITY_KEY in the environment)
Prints one JSON line of observations; exits non-zero on any failure.
"""

import json
import os
import sys

import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

BIN, HOME = sys.argv[1:3]


async def main():
    params = StdioServerParameters(
        command=BIN,
        args=["stdio", "--home", HOME],
        env={"CONTINUITY_KEY": os.environ["CONTINUITY_KEY"], "PATH": os.environ.get("PATH", "")},
    )
    seen = {}
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            seen["protocol_version"] = init.protocol_version
            seen["tools"] = [t.name for t in (await session.list_tools()).tools]
            result = await session.call_tool("memory_remember", {"text": "Remembered through the Python SDK over stdio"})
            assert not result.is_error, result
            found = await session.call_tool("memory_search", {"query": "Python SDK over stdio"})
            assert not found.is_error and found.structured_content["count"] >= 1, found
    print(json.dumps(seen))


anyio.run(main)
