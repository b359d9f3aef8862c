#!/usr/bin/env bash
# packaging/registry/server-json.sh - write server.json for the MCP registry.
#
#   packaging/registry/server-json.sh VERSION MCPB_URL MCPB_FILE OUTDIR [MCPB_URL MCPB_FILE]...
#
#   VERSION    the release version (the workspace version in Cargo.toml)
#   MCPB_URL   the bundle's release asset URL, e.g.
#              https://github.com/continuity-hq/continuity/releases/download/vVERSION/continuity-VERSION-x86_64-unknown-linux-gnu.mcpb
#   MCPB_FILE  the built bundle (packaging/mcpb/build.sh); its SHA-256 becomes fileSha256
#   OUTDIR     where OUTDIR/server.json is written
#   Further URL/FILE pairs add one mcpb package each (one bundle per platform).
#
# The packages: each MCPB bundle (stdio) and the container image
# ghcr.io/continuity-hq/continuity:VERSION (`continuity serve`, streamable HTTP on
# localhost:8787/mcp). The remote: a deployed stack, https://{api_host}/mcp, its host a
# variable the client asks for. The format is the one of server.schema.json next to this
# script (see SOURCE.md); tests/packaging/registry_test.sh validates the result.
#
# Environment: PYTHON (default python3).
set -euo pipefail

die() { printf 'registry/server-json.sh: %s\n' "$*" >&2; exit 1; }

if [ "$#" -lt 4 ] || [ $((($# - 4) % 2)) -ne 0 ]; then
  die "usage: server-json.sh VERSION MCPB_URL MCPB_FILE OUTDIR [MCPB_URL MCPB_FILE]..."
fi
VERSION="$1" OUTDIR="$4"
PAIRS=("$2" "$3")
shift 4
PAIRS+=("$@")
for ((i = 1; i < ${#PAIRS[@]}; i += 2)); do
  [ -f "${PAIRS[i]}" ] || die "no bundle at ${PAIRS[i]}"
done
mkdir -p "$OUTDIR"

"${PYTHON:-python3}" - "$VERSION" "$OUTDIR/server.json" "${PAIRS[@]}" <<'EOF'
import hashlib
import json
import sys

version, out, *pairs = sys.argv[1:]
repo = "https://github.com/continuity-hq/continuity"


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


packages = [
    {
        "registryType": "mcpb",
        "identifier": url,
        "version": version,
        "fileSha256": sha256(path),
        "transport": {"type": "stdio"},
    }
    for url, path in zip(pairs[0::2], pairs[1::2])
]
packages.append(
    {
        "registryType": "oci",
        "identifier": f"ghcr.io/continuity-hq/continuity:{version}",
        "runtimeHint": "docker",
        "runtimeArguments": [
            {
                "type": "named",
                "name": "--publish",
                "value": "8787:8787",
                "description": "Publish the MCP endpoint on localhost:8787",
            }
        ],
        "transport": {"type": "streamable-http", "url": "http://localhost:8787/mcp"},
    }
)

server = {
    "$schema": "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json",
    "name": "io.github.continuity-hq/continuity",
    "title": "Continuity",
    "description": "Governed memory for AI agents: remember, recall and forget under policy, local or on AWS.",
    "repository": {"url": repo, "source": "github"},
    "websiteUrl": repo,
    "version": version,
    "packages": packages,
    "remotes": [
        {
            "type": "streamable-http",
            "url": "https://{api_host}/mcp",
            "variables": {
                "api_host": {
                    "description": "Host name of your deployed Continuity stack's API (OAuth 2.1, or an API key as a bearer token)",
                    "isRequired": True,
                    "placeholder": "memory.example.com",
                }
            },
        }
    ],
}

with open(out, "w", encoding="utf-8") as f:
    json.dump(server, f, indent=2)
    f.write("\n")
print(out)
EOF
