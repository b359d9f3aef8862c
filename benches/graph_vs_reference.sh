#!/usr/bin/env bash
# The `graph` toolset beside the reference MCP memory server (@modelcontextprotocol/
# server-memory from npm) at 10 000 entities, both over stdio. Installs the reference
# server (and Node 22) into $HOME/.cache/continuity/npm if missing.
#
#   benches/graph_vs_reference.sh [ENTITIES]
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
CACHE="${CONTINUITY_CACHE:-$HOME/.cache/continuity}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$CACHE/target}"
NPM_DIR="$CACHE/npm"
mkdir -p "$NPM_DIR"
if [ ! -f "$NPM_DIR/node_modules/@modelcontextprotocol/server-memory/dist/index.js" ] || [ ! -x "$NPM_DIR/node_modules/.bin/node" ]; then
  (cd "$NPM_DIR" && { [ -f package.json ] || printf '{"private":true}\n' >package.json; } \
    && npm install --no-audit --no-fund --loglevel=error node@22.23.3 @modelcontextprotocol/server-memory@2026.8.31)
fi
cargo build --release --quiet -p continuity --bin continuity
python3 "$ROOT/benches/graph_vs_reference.py" "$CARGO_TARGET_DIR/release/continuity" "$NPM_DIR/node_modules/.bin/node" \
  "$NPM_DIR/node_modules/@modelcontextprotocol/server-memory/dist/index.js" "${1:-10000}"
