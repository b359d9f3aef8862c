#!/usr/bin/env bash
# tests/packaging/bundle_test.sh DIST - the Claude Desktop bundle runs as Claude Desktop
# starts it.
#
# Unpacks DIST/continuity-<version>-<host target>.mcpb, builds the command from its
# manifest the way the host does (`${__dirname}` is the unpacked folder, each
# `${user_config.X}` the option's default) — except `${HOME}` inside a default, which
# Claude Desktop passes through unexpanded (modelcontextprotocol/mcpb#251), so it is
# left as it is — and speaks MCP to it over stdio: initialize, tools/list, one
# tools/call. The server must answer with tools whose names every client accepts, and
# the home must be created at $HOME/.continuity.
#
# Needs python3. Exits non-zero with a message on failure.
set -euo pipefail

if [ "$#" -ne 1 ] || [ ! -d "$1" ]; then echo "usage: tests/packaging/bundle_test.sh DIST" >&2; exit 2; fi
DIST="$(cd "$1" && pwd)"
TARGET="$(rustc -vV | sed -n 's/^host: //p')"
BUNDLE="$(find "$DIST" -maxdepth 1 -name "continuity-*-$TARGET.mcpb" | head -n1)"
[ -n "$BUNDLE" ] || { echo "not ok - no bundle for $TARGET in $DIST" >&2; exit 1; }
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

python3 - "$BUNDLE" "$WORK" <<'PY'
import json, os, re, subprocess, sys, zipfile

bundle, work = sys.argv[1:]
unpacked = os.path.join(work, "bundle")
with zipfile.ZipFile(bundle) as z:
    z.extractall(unpacked)
    for info in z.infolist():  # zipfile drops the mode bits; the host keeps them
        mode = (info.external_attr >> 16) & 0o777
        if mode:
            os.chmod(os.path.join(unpacked, info.filename), mode)
manifest = json.load(open(os.path.join(unpacked, "manifest.json")))
defaults = {k: str(v.get("default", "")) for k, v in manifest.get("user_config", {}).items()}

def substitute(s):
    s = s.replace("${__dirname}", unpacked)
    return re.sub(r"\$\{user_config\.([A-Za-z0-9_]+)\}", lambda m: defaults[m.group(1)], s)

config = manifest["server"]["mcp_config"]
argv = [substitute(config["command"])] + [substitute(a) for a in config["args"]]
if not os.access(argv[0], os.X_OK):
    sys.exit(f"not ok - {argv[0]} is not executable in the bundle")
user_home = os.path.join(work, "user")
os.makedirs(user_home)
env = {"PATH": os.environ["PATH"], "HOME": user_home, "RUST_LOG": "warn", "CONTINUITY_EMBEDDER": "hashing"}
env.update({k: substitute(v) for k, v in config.get("env", {}).items()})
proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True, cwd=work)

def send(msg):
    proc.stdin.write(json.dumps(msg) + "\n")
    proc.stdin.flush()

def answer(id_):
    while True:
        line = proc.stdout.readline()
        if not line:
            sys.exit(f"not ok - the server closed stdout; stderr: {proc.stderr.read()[:2000]}")
        msg = json.loads(line)
        if msg.get("id") == id_:
            return msg

try:
    send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "claude-ai", "version": "0.1.0"}}})
    init = answer(1)
    if "result" not in init:
        sys.exit(f"not ok - initialize: {init}")
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    send({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}})
    tools = [t["name"] for t in answer(2)["result"]["tools"]]
    bad = [n for n in tools if not re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", n)]
    if not tools or bad:
        sys.exit(f"not ok - tools/list: {tools} (names clients refuse: {bad})")
    send({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
          "params": {"name": "memory_search", "arguments": {"query": "anything"}}})
    call = answer(3)
    if "result" not in call or call["result"].get("isError"):
        sys.exit(f"not ok - tools/call memory_search: {call}")
finally:
    proc.stdin.close()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()

home = os.path.join(user_home, ".continuity")
if not os.path.isfile(os.path.join(home, "continuity.db")):
    sys.exit(f"not ok - the bundle's default home {home} was not created (args: {argv[1:]})")
print(f"ok - the bundle runs as Claude Desktop starts it: {' '.join(argv[1:])}; {len(tools)} tools; home {home}")
PY
