#!/usr/bin/env bash
# The `authorization` scenarios of @modelcontextprotocol/conformance against a fresh
# `continuity serve`: authorization-server-metadata-endpoint, and the interactive
# authorization-code-grant, whose browser part tests/conformance/browser.py plays
# (it signs in on our real login page and approves on the consent page).
#
# Usage: tests/conformance/authorization.sh CONTINUITY_BIN NODE CONFORMANCE_JS
# Exit status: the suite's (non-zero if any check failed, or a scenario did not run).
set -euo pipefail

BIN="$1" NODE="$2" SUITE="$3"
HERE="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=tests/conformance/healthy.sh
. "$HERE/healthy.sh"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/continuity-conformance.XXXXXX")"
SERVE_PID=""
cleanup() {
  local status=$?
  if [ -n "$SERVE_PID" ]; then
    kill "$SERVE_PID" 2>/dev/null || true
    # `serve` writes its last files into the home while it stops: wait (up to 10 s)
    # before removing it.
    for _ in $(seq 50); do kill -0 "$SERVE_PID" 2>/dev/null || break; sleep 0.2; done
    kill -9 "$SERVE_PID" 2>/dev/null || true
    wait "$SERVE_PID" 2>/dev/null || true
  fi
  rm -rf "$WORK" || true
  exit "$status"
}
trap cleanup EXIT

read -r PORT CALLBACK_PORT < <(python3 -c 'import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*(x.getsockname()[1] for x in s))
for x in s: x.close()')
BASE="http://127.0.0.1:$PORT"
PASSWORD="conformance password 42"

"$BIN" --home "$WORK/home" init >/dev/null
printf '%s\n' "$PASSWORD" | "$BIN" --home "$WORK/home" user add --tenant local --email conformance@example.com >/dev/null
"$BIN" --home "$WORK/home" serve --embedder hashing --addr "127.0.0.1:$PORT" >"$WORK/serve.log" 2>&1 &
SERVE_PID=$!
wait_healthy "$BASE/healthz" "$WORK/serve.log"

# The suite's callback must be a registered redirect URI: register a public client.
CLIENT_ID="$(python3 - "$BASE" "$CALLBACK_PORT" <<'PY'
import json, sys, urllib.request
base, port = sys.argv[1:3]
body = json.dumps({"client_name": "conformance", "redirect_uris": [f"http://127.0.0.1:{port}/callback"]}).encode()
req = urllib.request.Request(base + "/oauth/register", body, {"content-type": "application/json"})
print(json.load(urllib.request.urlopen(req))["client_id"])
PY
)"

set +e
"$NODE" "$SUITE" authorization --url "$BASE/" --client-id "$CLIENT_ID" -p "$CALLBACK_PORT" -o "$WORK/results" \
  >"$WORK/suite.out" 2>&1 &
SUITE_PID=$!
python3 "$HERE/browser.py" "$WORK/suite.out" local conformance@example.com "$PASSWORD"
BROWSER=$?
wait "$SUITE_PID"
STATUS=$?
set -e
# The suite's own summary (ANSI colours stripped).
sed -e 's/\x1b\[[0-9;]*m//g' "$WORK/suite.out" | sed -n '/=== SUMMARY ===/,$p'
if [ "$BROWSER" -ne 0 ]; then
  echo "the browser step failed" >&2
  exit 1
fi
# Both scenarios must have run checks and passed them (a skipped grant has 0 passed).
grep -q 'authorization-server-metadata-endpoint: [1-9][0-9]* passed, 0 failed' <(sed -e 's/\x1b\[[0-9;]*m//g' "$WORK/suite.out")
grep -q 'authorization-code-grant: [1-9][0-9]* passed, 0 failed' <(sed -e 's/\x1b\[[0-9;]*m//g' "$WORK/suite.out")
exit "$STATUS"
