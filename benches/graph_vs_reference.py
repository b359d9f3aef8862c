"""The `graph` toolset beside the reference MCP memory server, over stdio, at 10 000
entities: per-call latency of `create_entities` (one new entity per call), a narrow
`search_nodes` (a query matching a handful of entities) and a broad one (a region shared
by 1 in 37 entities: ~270 at 10 000). A call's time runs from writing the request to
having read the whole answer line; the client's JSON parsing is not counted (it is the
client's cost, and at ~270 entities it would dwarf either server's). Standard library
only.

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
        self.p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True,
                                  bufsize=1 << 20)
        self.id = 0
        self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, msg):
        self.p.stdin.write(json.dumps(msg) + "\n")
        self.p.stdin.flush()

    def request(self, method, params):
        """The result, the seconds until its line was read, and the line's length."""
        self.id += 1
        start = time.perf_counter()
        self.send({"jsonrpc": "2.0", "id": self.id, "method": method, "params": params})
        while True:
            line = self.p.stdout.readline()
            took = time.perf_counter() - start
            if not line:
                raise SystemExit(f"server closed during {method}")
            msg = json.loads(line)
            if msg.get("id") == self.id:
                if "error" in msg or msg.get("result", {}).get("isError"):
                    raise SystemExit(f"{method} failed: {msg}")
                return msg["result"], took, len(line)

    def call(self, name, args):
        return self.request("tools/call", {"name": name, "arguments": args})

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=30)


def entity(i):
    return {"name": f"Entity {i:05d}", "entityType": "person" if i % 2 else "project",
            "observations": [f"observation {i} about topic-{i % 100}", f"works with Entity {(i + 1) % N:05d}",
                             f"based in region r{i % 37:02d}"]}


def measure(server, label):
    for start in range(0, N, 250):
        server.call("create_entities", {"entities": [entity(i) for i in range(start, min(N, start + 250))]})
    create = []
    for k in range(CALLS):
        _, took, _ = server.call("create_entities", {"entities": [{"name": f"New {k}", "entityType": "person", "observations": ["fresh"]}]})
        create.append(took * 1000)
    narrow, broad, size = [], [], []
    for k in range(CALLS):
        r, took, _ = server.call("search_nodes", {"query": f"Entity {(k * 97) % N:05d}"})
        narrow.append(took * 1000)
        found = r.get("structuredContent", {}).get("entities") or json.loads(r["content"][0]["text"])["entities"]
        assert len(found) >= 1, f"{label}: the narrow search found nothing"
    for k in range(CALLS):
        r, took, length = server.call("search_nodes", {"query": f"region r{k % 37:02d}"})
        broad.append(took * 1000)
        size.append(length)
        found = r.get("structuredContent", {}).get("entities") or json.loads(r["content"][0]["text"])["entities"]
        assert len(found) >= N // 37, f"{label}: the broad search found {len(found)}"
    c, n, b = statistics.median(create), statistics.median(narrow), statistics.median(broad)
    print(f"{label:<24} create_entities {c:7.2f} ms   search_nodes narrow {n:7.2f} ms   broad {b:7.2f} ms "
          f"(~{len(found)} entities, {statistics.median(size) / 1024:.0f} KiB answer)   medians over {CALLS} calls, {N} entities")
    return c, n, b


with tempfile.TemporaryDirectory() as d:
    ref = Stdio([NODE, REF], env={**os.environ, "MEMORY_FILE_PATH": os.path.join(d, "memory.jsonl")})
    rc, rn, rb = measure(ref, "reference server-memory")
    ref.close()
    ours = Stdio([BIN, "--home", os.path.join(d, "home"), "stdio", "--toolsets", "graph"], env={**os.environ, "RUST_LOG": "error"})
    oc, on, ob = measure(ours, "continuity (graph)")
    ours.close()
print(f"speed-up: create_entities {rc / oc:.1f}x, search_nodes narrow {rn / on:.1f}x, broad {rb / ob:.1f}x")
