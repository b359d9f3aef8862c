"""Times `continuity import` / `export` (see import_export.sh)."""

import json
import os
import subprocess
import sys
import tempfile
import time

binary, n = sys.argv[1], int(sys.argv[2])
work = tempfile.mkdtemp(prefix="continuity-import-bench-")
home = os.path.join(work, "home")
graph = os.path.join(work, "memory.jsonl")
mem0 = os.path.join(work, "mem0.jsonl")
with open(graph, "w") as f:
    for i in range(n):
        obs = [f"observation {k} of entity {i}" for k in range(i % 3 + 1)]
        f.write(json.dumps({"type": "entity", "name": f"entity-{i}", "entityType": ["person", "project", "service"][i % 3], "observations": obs}) + "\n")
    for i in range(n):
        f.write(json.dumps({"type": "relation", "from": f"entity-{i}", "to": f"entity-{(i * 7 + 1) % n}", "relationType": "depends_on"}) + "\n")
        if i % 2 == 0:
            f.write(json.dumps({"type": "relation", "from": f"entity-{i}", "to": f"entity-{(i + 3) % n}", "relationType": "works_with"}) + "\n")
with open(mem0, "w") as f:
    for i in range(n):
        f.write(json.dumps({"memory": f"Fact number {i}: the team ships module {i % 97} on day {i % 7}", "user_id": "ada", "created_at": "2026-01-01T00:00:00Z", "metadata": {"n": i}}) + "\n")


def peak_anon(pid):
    """The process's anonymous resident memory (heap) in kB: not the mapped binary or database."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def run(*args):
    """Runs a command; returns (seconds, its output, peak anonymous memory in MB, sampled every 20 ms)."""
    started = time.perf_counter()
    p = subprocess.Popen([binary, "--home", home, "--embedder", "hashing", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env={**os.environ, "RUST_LOG": "warn"})
    peak = 0
    while p.poll() is None:
        peak = max(peak, peak_anon(p.pid))
        time.sleep(0.02)
    stdout, stderr = p.communicate()
    took = time.perf_counter() - started
    if p.returncode != 0:
        sys.exit(f"{args}: {stderr}")
    return took, subprocess.CompletedProcess(args, p.returncode, stdout, stderr), peak / 1024


run("init")  # the home, created outside the timings
relations = n + (n + 1) // 2
took, _, peak = run("import", graph)
size = os.path.getsize(graph) / 1e6
print(f"import memory.jsonl: {n} entities + {relations} relations in {took:.2f} s = {(n + relations) / took:.0f} items/s (read back included); peak heap {peak:.0f} MB for a {size:.0f} MB file")
took, _, _ = run("import", graph)
print(f"import memory.jsonl again (nothing new): {took:.2f} s")
took, _, _ = run("import", mem0)
print(f"import mem0 JSONL: {n} memories in {took:.2f} s = {n / took:.0f} memories/s (indexed, read back)")
took, out, _ = run("export", "--out", os.path.join(work, "bundle.jsonl"))
print(f"export bundle: {out.stderr.strip().splitlines()[-1]} in {took:.2f} s")
