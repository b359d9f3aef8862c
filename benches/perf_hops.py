#!/usr/bin/env python3
"""benches/perf_hops.py PERF_SCRIPT_OUTPUT [CPU_US] - the server's samples filed by hop.

Reads `perf script -F comm,tid,ip,sym --no-inline` output of a `perf record --call-graph
dwarf` of `continuity serve` (or of the floor) and files each sample under the first hop
below whose test its stack passes (leaf first; kernel frames, which perf prints as bare
addresses at perf_event_paranoid 2, count as the kernel). Prints each hop's share of the
samples and, given CPU_US (the server's CPU per request, as benches/http_entity_get.sh
prints it), its share of that in microseconds. The kernel hop is also split by the
system call the stack entered it through. Used for docs/benchmarks.md's budget table.
"""
import collections
import re
import sys

KERNEL = "[kernel]"

# (hop, test over the stack's frames, leaf first); the first that passes takes the sample.
HOPS = [
    ("audit writer (records to JSON, SQLite inserts)", lambda st: any("AuditService::writer" in f or "append_audits" in f for f in st)),
    ("kernel", lambda st: bool(st) and st[0] == KERNEL),
    ("authentication: key record, change signal", lambda st: any(re.search(r"Authenticator::(authenticate|api_key|verify|key)|credential_epoch|FileEpoch", f) for f in st)),
    ("the tenant's configuration", lambda st: any("tenant_config" in f for f in st)),
    ("rate limit", lambda st: any("rate_limit" in f or "MemoryLimiter" in f for f in st)),
    ("audit record queued", lambda st: any(re.search(r"audit", f, re.I) for f in st)),
    ("ADK resolution, schema check", lambda st: any(re.search(r"adk::|jsonschema|capabilities::", f) for f in st)),
    ("entity from the cache, its text", lambda st: any(re.search(r"EntityService|[Rr]ender|MemoryCache", f) for f in st)),
    ("JSON-RPC parse, answer serialization", lambda st: any(re.search(r"serde_json|envelope|fast_call|Answer", f) for f in st)),
    ("the tool call's own task", lambda st: any(re.search(r"mcp::", f) for f in st)),
    ("/mcp handler and the edge (key parse and hash, task spawn, deadline, request log, metrics)", lambda st: any(re.search(r"gateway::|metrics::", f) for f in st)),
    ("hyper", lambda st: any("hyper::" in f for f in st)),
    ("tokio, other", lambda st: True),
]

# The first frame of a kernel sample's stack that names how user space entered it.
SYSCALLS = [
    ("the response's writev", r"write_vectored"),
    ("SQLite writes and flushes", r"^unix(Write|Read|Sync)|^f(data)?sync$"),
    ("the change signal's statx", r"^statx$"),
    ("read", r"as std::io::Read>::read"),
    ("epoll_wait", r"^epoll_wait$"),
    ("parking, waking threads", r"park|unpark|futex"),
]


def samples(path):
    stack = None
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if not line.strip():
                if stack is not None:
                    yield stack
                stack = None
            elif not line[0].isspace():
                stack = []
            elif stack is not None:
                addr, _, sym = line.strip().partition(" ")
                kernel = addr.startswith("ffffffff") and addr != "ffffffffffffffff"
                stack.append(KERNEL if kernel else sym.strip() or "?")
    if stack is not None:
        yield stack


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    cpu_us = float(sys.argv[2]) if len(sys.argv) > 2 else None
    hops, syscalls, n = collections.Counter(), collections.Counter(), 0
    for st in samples(sys.argv[1]):
        n += 1
        hop = next(name for name, test in HOPS if test(st))
        hops[hop] += 1
        if hop == "kernel":
            user = [f for f in st if f != KERNEL]
            how = next((name for name, pat in SYSCALLS if any(re.search(pat, f) for f in user[:6])), "other")
            syscalls[how] += 1
    if not n:
        sys.exit("no samples")
    print(f"{n} samples")
    for name, _ in HOPS:
        us = f"  {cpu_us * hops[name] / n:5.2f} µs" if cpu_us else ""
        print(f"{100 * hops[name] / n:5.1f} %{us}  {name}")
        if name == "kernel":
            for how, k in syscalls.most_common():
                us = f"  {cpu_us * k / n:5.2f} µs" if cpu_us else ""
                print(f"        {100 * k / n:5.1f} %{us}  {how}")


if __name__ == "__main__":
    main()
