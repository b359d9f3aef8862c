"""The `graph` toolset beside the reference MCP memory server, over stdio, at 10 000
entities: per-call latency of `create_entities` (one new entity per call) and
`search_nodes` (a query matching a handful of entities). Standard library only.

Usage: graph_vs_reference.py CONTINUITY_BIN NODE REFERENCE_JS [ENTITIES]
Prints one line per system and the ratios.
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

BIN, NODE, REF = sys.argv[1:4]
N = int(sys.argv[4]) if len(sys.argv) > 4 else 10_000
CALLS = 60


class Stdio:
    def __init__(self, cmd, env=None):
        self.p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True)
        self.id = 0
        self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, msg):
        self.p.stdin.write(json.dumps(msg) + "\n")
        self.p.stdin.flush()

    def request(self, method, params):
        self.id += 1
        self.send({"jsonrpc": "2.0", "id": self.id, "method": method, "params": params})
        while True:
            line = self.p.stdout.readline()
            if not line:
                raise SystemExit(f"server closed during {method}")
            msg = json.loads(line)
            if msg.get("id") == self.id:
                if "error" in msg or msg.get("result", {}).get("isError"):
                    raise SystemExit(f"{method} failed: {msg}")
                return msg["result"]

    def call(self, name, args):
        return self.request("tools/call", {"name": name, "arguments": args})

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=30)


def entity(i):
    return {"name": f"Entity {i:05d}", "entityType": "person" if i % 2 else "project",
            "observations": [f"observation {i} about topic-{i % 100}", f"works with Entity {(i + 1) % N:05d}"]}


def measure(server, label):
    for start in range(0, N, 250):
        server.call("create_entities", {"entities": [entity(i) for i in range(start, min(N, start + 250))]})
    create = []
    for k in range(CALLS):
        t = time.perf_counter()
        server.call("create_entities", {"entities": [{"name": f"New {k}", "entityType": "person", "observations": ["fresh"]}]})
        create.append((time.perf_counter() - t) * 1000)
    search = []
    for k in range(CALLS):
        t = time.perf_counter()
        r = server.call("search_nodes", {"query": f"Entity {(k * 97) % N:05d}"})
        search.append((time.perf_counter() - t) * 1000)
    found = r.get("structuredContent", {}).get("entities") or json.loads(r["content"][0]["text"])["entities"]
    assert len(found) >= 1, f"{label}: the search found nothing"
    c, s = statistics.median(create), statistics.median(search)
    print(f"{label:<24} create_entities median {c:8.2f} ms   search_nodes median {s:8.2f} ms   ({N} entities, {CALLS} calls each)")
    return c, s


with tempfile.TemporaryDirectory() as d:
    ref = Stdio([NODE, REF], env={**os.environ, "MEMORY_FILE_PATH": os.path.join(d, "memory.jsonl")})
    rc, rs = measure(ref, "reference server-memory")
    ref.close()
    ours = Stdio([BIN, "--home", os.path.join(d, "home"), "stdio", "--toolsets", "graph"], env={**os.environ, "RUST_LOG": "error"})
    oc, os_ = measure(ours, "continuity (graph)")
    ours.close()
print(f"speed-up: create_entities {rc / oc:.1f}x, search_nodes {rs / os_:.1f}x")
