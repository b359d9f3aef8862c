#!/usr/bin/env bash
# Load benchmark: `spine.entity.get` over MCP (Streamable HTTP, stateless JSON) on
# loopback against a release `continuity serve`, hot cache, 32 connections, wrk with
# one thread (THREADS=2 to change: on 2 cores a second wrk thread competes with the
# server for CPU and measures the load generator more than the server).
#
#   benches/http_entity_get.sh            # 20 s run; DURATION=60s to change
#   CONNECTIONS=1 benches/http_entity_get.sh   # the single-request latency floor
#
# Installs `wrk` with apt if it is missing (Debian). Prints wrk's latency distribution
# (p50/p75/p90/p99) and requests/s. The tenant's rate limit is raised for the run so the
# limiter does not answer 429s.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DURATION="${DURATION:-20s}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/continuity/target}"
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk; }
cargo build --release --quiet -p continuity --bin continuity
BIN="$CARGO_TARGET_DIR/release/continuity"
WORK="$(mktemp -d)"
trap 'kill "${PID:-0}" 2>/dev/null || true; rm -rf "$WORK"' EXIT
PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
"$BIN" --home "$WORK/home" init >/dev/null
"$BIN" --home "$WORK/home" tenant set local --rate-limit-per-minute 100000000 >/dev/null
"$BIN" --home "$WORK/home" entity put --tenant local --type account --id acme-1 \
  --attributes '{"name":"Acme Corp","tier":"gold"}' --pole-class organization >/dev/null
RUST_LOG=warn "$BIN" --home "$WORK/home" serve --embedder hashing --addr "127.0.0.1:$PORT" >"$WORK/serve.log" 2>&1 &
PID=$!
for _ in $(seq 1 100); do
  python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$PORT/healthz')" 2>/dev/null && break
  sleep 0.1
done
KEY="$(cat "$WORK/home/owner.key")"
cat >"$WORK/get.lua" <<LUA
wrk.method = "POST"
wrk.body = '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"spine.entity.get","arguments":{"type":"account","id":"acme-1"}}}'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json, text/event-stream"
wrk.headers["MCP-Protocol-Version"] = "2025-06-18"
wrk.headers["Authorization"] = "Bearer $KEY"
response = function(status, headers, body)
  if status ~= 200 then
    io.stderr:write("unexpected status " .. status .. "\n")
  end
end
LUA
# Warm the entity cache, then measure.
wrk -t1 -c1 -d1s -s "$WORK/get.lua" "http://127.0.0.1:$PORT/mcp" >/dev/null
wrk -t"${THREADS:-1}" -c"${CONNECTIONS:-32}" -d"$DURATION" --latency -s "$WORK/get.lua" "http://127.0.0.1:$PORT/mcp"
