#!/usr/bin/env bash
# The @modelcontextprotocol/conformance *server* scenarios that apply to Continuity, run
# against a fresh `continuity serve` through tests/conformance/auth-proxy.mjs (the suite
# sends no credentials; the proxy adds the owner key and passes everything else through
# unchanged, Host and Origin included).
#
# Usage: tests/conformance/server.sh CONTINUITY_BIN NODE CONFORMANCE_JS
# Each scenario must run at least one check and fail none. The README explains the
# scenarios that are not run (fixture tools/resources/prompts of the suite's reference
# server, sessions, the 2026-07-28 subscriptions extension).
set -euo pipefail

BIN="$1" NODE="$2" SUITE="$3"
HERE="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=tests/conformance/healthy.sh
. "$HERE/healthy.sh"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/continuity-conformance.XXXXXX")"
PIDS=()
cleanup() {
  local status=$?
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  # `serve` stops gracefully on SIGTERM and writes its last files into the home while it
  # does: removing the home before it has exited races it. Wait up to 10 s, then kill.
  for p in "${PIDS[@]}"; do
    for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.2; done
    kill -9 "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
  done
  rm -rf "$WORK" || true
  exit "$status"
}
trap cleanup EXIT

SCENARIOS=(
  server-initialize
  server-session-lifecycle
  server-sse-multiple-streams
  ping
  tools-list
  tools-call-error
  resources-list
  prompts-list
  sep-2164-resource-not-found
  dns-rebinding-protection
  http-header-validation
  caching
)

read -r PORT PROXY_PORT < <(python3 -c 'import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*(x.getsockname()[1] for x in s))
for x in s: x.close()')

"$BIN" --home "$WORK/home" init >/dev/null
"$BIN" --home "$WORK/home" serve --embedder hashing --addr "127.0.0.1:$PORT" >"$WORK/serve.log" 2>&1 &
PIDS+=("$!")
"$NODE" "$HERE/auth-proxy.mjs" "$PROXY_PORT" "$PORT" "$(cat "$WORK/home/owner.key")" >"$WORK/proxy.log" 2>&1 &
PIDS+=("$!")
wait_healthy "http://127.0.0.1:$PROXY_PORT/healthz" "$WORK/serve.log" "$WORK/proxy.log"

failed=0
for s in "${SCENARIOS[@]}"; do
  out="$("$NODE" "$SUITE" server --url "http://localhost:$PROXY_PORT/mcp" --scenario "$s" 2>&1 | sed -e 's/\x1b\[[0-9;]*m//g' || true)"
  line="$(grep -E '^Passed: ' <<<"$out" | tail -1)"
  if [[ "$line" =~ ^Passed:\ ([0-9]+)/([0-9]+),\ 0\ failed ]] && [ "${BASH_REMATCH[1]}" -ge 1 ]; then
    printf '    %-32s %s\n' "$s" "$line"
  else
    printf '    %-32s FAILED: %s\n' "$s" "${line:-no result}"
    grep -E 'FAILURE' <<<"$out" | head -5 | sed 's/^/        /'
    failed=1
  fi
done
exit "$failed"
