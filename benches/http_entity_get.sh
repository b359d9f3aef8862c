#!/usr/bin/env bash
# Load benchmark: `spine.entity.get` over MCP (Streamable HTTP, stateless JSON) on
# loopback against a release `continuity serve`, hot cache, 32 connections, wrk with
# one thread (THREADS=2 to change: on 2 cores a second wrk thread competes with the
# server for CPU and measures the load generator more than the server) — and, in the
# same run, the floor: `functions/local/benches/http_floor.rs`, a bare axum server on the
# same runtime and allocator answering every request with the same response bytes.
#
#   benches/http_entity_get.sh            # 20 s per server; DURATION=60s to change
#   CONNECTIONS=1 benches/http_entity_get.sh   # the single-request latency floor
#   ONLY=serve benches/http_entity_get.sh      # skip the floor (ONLY=floor: only it)
#   PROFILE=release-check benches/http_entity_get.sh   # release without LTO: builds in
#                                                      # minutes, for side-by-side runs
#   BIN=path/to/continuity benches/http_entity_get.sh  # that binary (e.g. an earlier
#                                                      # commit's) instead of building one
#   PERF=DIR benches/http_entity_get.sh   # also profiles each server for 8 s of its run
#       (perf record --call-graph dwarf; apt's linux-perf) into DIR/{serve,floor}.txt
#       and prints each one's CPU per request by hop (benches/perf_hops.py). Give it
#       unstripped binaries: CARGO_PROFILE_RELEASE_CHECK_STRIP=false with
#       PROFILE=release-check. perf's own cost inflates the CPU of that run.
#
# Installs `wrk` with apt if it is missing (Debian). Prints wrk's latency distribution
# (p50/p75/p90/p99) and requests/s for each, then one line comparing them, and the CPU
# each side spent per request (the server's user + system time from /proc, every thread;
# wrk's from bash's `time`): with both on the same two cores, what a request may cost the
# server for it to reach 60 % of the floor is 2 cores / (0.6 × the floor's rate) minus
# what wrk spends on it, which the last line prints beside what it costs. The tenant's
# rate limit is raised for the run so the limiter does not answer 429s. Builds with
# `--release --target <host>`, the folder scripts/release.sh builds in, so the two share
# their dependencies' build.
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION="${DURATION:-20s}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/continuity/target}"
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk; }
HOST="$(rustc -vV | sed -n 's/^host: //p')"
PROFILE="${PROFILE:-release}"
if [ -z "${BIN:-}" ]; then
  cargo build --profile "$PROFILE" --quiet --target "$HOST" -p continuity --bin continuity
  BIN="$CARGO_TARGET_DIR/$HOST/$PROFILE/continuity"
fi
if [ "${ONLY:-}" != serve ]; then
  FLOOR="$(cargo build --profile "$PROFILE" --quiet --target "$HOST" -p continuity --bench http_floor --message-format=json \
    | python3 -c 'import json,sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "http_floor" and m.get("executable"):
        print(m["executable"])')"
  [ -x "$FLOOR" ] || { echo "the http_floor bench did not build" >&2; exit 1; }
fi
WORK="$(mktemp -d)"
# Only the servers this script started: `kill 0` would signal the caller's whole
# process group (with ONLY=serve the floor never starts).
trap 'for p in ${PID:-} ${FLOOR_PID:-}; do kill "$p" 2>/dev/null || true; done; rm -rf "$WORK"' EXIT
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
# The response continuity gives: the floor answers with these bytes.
curl -sf "http://127.0.0.1:$PORT/mcp" -H 'content-type: application/json' -H 'accept: application/json, text/event-stream' \
  -H 'mcp-protocol-version: 2025-06-18' -H "authorization: Bearer $KEY" \
  -d '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"spine.entity.get","arguments":{"type":"account","id":"acme-1"}}}' \
  >"$WORK/response.json"
grep -q '"Acme Corp"' "$WORK/response.json" || { echo "unexpected response: $(head -c 400 "$WORK/response.json")" >&2; exit 1; }

TICKS="$(getconf CLK_TCK)"
cpu_seconds() { # PID -> user + system seconds of every thread so far
  awk -v hz="$TICKS" '{ sub(/^.*\) /, ""); print ($12 + $13) / hz }' "/proc/$1/stat"
}
measure() { # NAME URL PID
  # Warm (the entity cache, the connections), then measure.
  wrk -t1 -c1 -d1s -s "$WORK/get.lua" "$2" >/dev/null
  echo "== $1"
  local before after TIMEFORMAT='%U %S'
  before="$(cpu_seconds "$3")"
  if [ -n "${PERF:-}" ]; then
    (sleep 3 && perf record -q -F 499 --call-graph dwarf,16384 -p "$3" -o "$PERF/$1.data" -- sleep 8 >/dev/null 2>&1) &
    PERF_PIDS="${PERF_PIDS:-} $!"
  fi
  { time wrk -t"${THREADS:-1}" -c"${CONNECTIONS:-32}" -d"$DURATION" --latency -s "$WORK/get.lua" "$2" >"$WORK/$1.out"; } 2>"$WORK/$1.wrk-cpu"
  after="$(cpu_seconds "$3")"
  cat "$WORK/$1.out"
  echo "$before $after $(cat "$WORK/$1.wrk-cpu")" >"$WORK/$1.cpu"
}
summary() { # NAME -> "req/s p50 p99 requests server-cpu-s wrk-cpu-s"
  read -r before after wrk_user wrk_sys <"$WORK/$1.cpu"
  awk -v cpu="$before $after" -v wrk="$wrk_user $wrk_sys" \
    '/Requests\/sec/ { rps = $2 } / 50%/ { p50 = $2 } / 99%/ { p99 = $2 } / requests in / { n = $1 }
     END { split(cpu, c, " "); split(wrk, w, " "); print rps, p50, p99, n, c[2] - c[1], w[1] + w[2] }' "$WORK/$1.out"
}
if [ "${ONLY:-}" != floor ]; then
  measure serve "http://127.0.0.1:$PORT/mcp" "$PID"
fi
if [ "${ONLY:-}" != serve ]; then
  kill "$PID" 2>/dev/null || true
  wait "$PID" 2>/dev/null || true
  FLOOR_PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
  "$FLOOR" "127.0.0.1:$FLOOR_PORT" "$WORK/response.json" >"$WORK/floor.log" 2>&1 &
  FLOOR_PID=$!
  for _ in $(seq 1 100); do grep -q listening "$WORK/floor.log" 2>/dev/null && break; sleep 0.1; done
  measure floor "http://127.0.0.1:$FLOOR_PORT/mcp" "$FLOOR_PID"
fi
if [ -z "${ONLY:-}" ]; then
  read -ra s_fields <<<"$(summary serve)"
  read -ra f_fields <<<"$(summary floor)"
  python3 - "${s_fields[@]}" "${f_fields[@]}" <<'PY'
import sys
s_rps, s_p50, s_p99, s_n, s_cpu, s_wrk, f_rps, f_p50, f_p99, f_n, f_cpu, f_wrk = sys.argv[1:]
s_rps, f_rps = float(s_rps), float(f_rps)
us = lambda seconds, n: 1e6 * float(seconds) / float(n)
print(f"== serve {s_rps:,.0f} req/s (p50 {s_p50}, p99 {s_p99}) = {100 * s_rps / f_rps:.0f} % of the floor "
      f"{f_rps:,.0f} req/s (p50 {f_p50}, p99 {f_p99})")
wrk_us = us(s_wrk, s_n)
budget = 2e6 / (0.6 * f_rps) - wrk_us
print(f"== CPU per request: serve {us(s_cpu, s_n):.1f} µs (wrk {wrk_us:.1f} µs beside it), the floor {us(f_cpu, f_n):.1f} µs "
      f"(wrk {us(f_wrk, f_n):.1f} µs); 60 % of the floor on 2 cores leaves serve {budget:.1f} µs a request")
PY
fi
if [ -n "${PERF:-}" ]; then
  for p in $PERF_PIDS; do wait "$p" || true; done
  for side in serve floor; do
    [ -f "$PERF/$side.data" ] || continue
    perf script -i "$PERF/$side.data" -F comm,tid,ip,sym --no-inline >"$PERF/$side.txt" 2>/dev/null
    read -ra fields <<<"$(summary "$side")"
    echo "== $side, CPU per request by hop (benches/perf_hops.py)"
    python3 benches/perf_hops.py "$PERF/$side.txt" "$(python3 -c "import sys; print(1e6 * float(sys.argv[1]) / float(sys.argv[2]))" "${fields[4]}" "${fields[3]}")"
  done
fi
