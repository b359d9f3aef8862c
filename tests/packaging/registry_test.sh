#!/usr/bin/env bash
# tests/packaging/registry_test.sh - check the MCP registry entry and the MCPB bundles.
#
#   tests/packaging/registry_test.sh OUTDIR
#
# OUTDIR holds server.json (packaging/registry/server-json.sh) and the .mcpb bundles it
# names (packaging/mcpb/build.sh). Checks, offline:
#   - server.json validates against packaging/registry/server.schema.json (the registry's
#     published schema, kept in the repository: see packaging/registry/SOURCE.md), and
#     its $schema is that schema's $id;
#   - copies broken on purpose (no name; a description over the limit) fail, so the
#     check can fail;
#   - server.json's version, the MCPB manifest template's and each bundle's manifest
#     version equal [workspace.package] version in Cargo.toml;
#   - each mcpb package: a release asset URL of this version on GitHub that contains
#     "mcp" (the registry's rules), the bundle is in OUTDIR and fileSha256 is its SHA-256,
#     and its entry point is in the bundle, executable;
#   - the oci package is ghcr.io/continuity-hq/continuity:VERSION;
#   - README.md carries the registry's ownership line `mcp-name: NAME`.
# Exits non-zero with a message on the first failing group of checks.
#
# Environment: PYTHON, a Python 3 with jsonschema importable (default python3).
set -euo pipefail

[ "$#" -eq 1 ] || { echo "usage: registry_test.sh OUTDIR" >&2; exit 2; }
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"

exec "${PYTHON:-python3}" - "$ROOT" "$1" <<'EOF'
import copy
import hashlib
import json
import os
import stat
import sys
import zipfile

root, outdir = sys.argv[1:]
NAME = "io.github.continuity-hq/continuity"
REPO = "https://github.com/continuity-hq/continuity"
failures = []


def fail(msg):
    failures.append(msg)


def done(group):
    if failures:
        for f in failures:
            print(f"FAIL: {f}", file=sys.stderr)
        sys.exit(f"registry_test: {group}: {len(failures)} failure(s)")
    print(f"ok: {group}")


try:
    import jsonschema
except ImportError:
    sys.exit("registry_test: jsonschema is not importable by this Python (set PYTHON)")

with open(os.path.join(root, "Cargo.toml"), "rb") as f:
    cargo_toml = f.read()
try:
    import tomllib

    cargo_version = tomllib.loads(cargo_toml.decode())["workspace"]["package"]["version"]
except ImportError:  # Python < 3.11
    import re

    section = re.search(r"^\[workspace\.package\]$(.*?)(?=^\[|\Z)", cargo_toml.decode(), re.M | re.S)
    cargo_version = re.search(r'^version\s*=\s*"([^"]+)"', section.group(1), re.M).group(1)
with open(os.path.join(root, "packaging/registry/server.schema.json"), encoding="utf-8") as f:
    schema = json.load(f)
server_path = os.path.join(outdir, "server.json")
try:
    with open(server_path, encoding="utf-8") as f:
        server = json.load(f)
except (OSError, ValueError) as e:
    sys.exit(f"registry_test: cannot read {server_path}: {e}")

# --- schema
Validator = jsonschema.validators.validator_for(schema)
Validator.check_schema(schema)
validator = Validator(schema, format_checker=Validator.FORMAT_CHECKER)


def errors(doc):
    return sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path))


for e in errors(server):
    path = "/".join(str(p) for p in e.absolute_path) or "(root)"
    fail(f"server.json does not match the schema at {path}: {e.message}")
if server.get("$schema") != schema.get("$id"):
    fail(f"server.json $schema {server.get('$schema')!r} is not the kept schema's $id {schema.get('$id')!r}")
done("server.json validates against " + schema.get("$id", "the schema"))

broken = {}
broken["no name"] = copy.deepcopy(server)
broken["no name"].pop("name", None)
broken["description over the limit"] = copy.deepcopy(server)
broken["description over the limit"]["description"] = "x" * 101
broken["oci package without identifier"] = copy.deepcopy(server)
for p in broken["oci package without identifier"].get("packages", []):
    p.pop("identifier", None)
for what, doc in broken.items():
    if not errors(doc):
        fail(f"a copy of server.json with {what} validates: the schema check cannot fail")
done("broken copies of server.json fail validation")

# --- versions and packages
if server.get("name") != NAME:
    fail(f"server.json name is {server.get('name')!r}, not {NAME!r}")
if server.get("version") != cargo_version:
    fail(f"server.json version {server.get('version')!r} != Cargo.toml workspace version {cargo_version!r}")
with open(os.path.join(root, "packaging/mcpb/manifest.json"), encoding="utf-8") as f:
    template = json.load(f)
if template.get("version") != cargo_version:
    fail(f"packaging/mcpb/manifest.json version {template.get('version')!r} != Cargo.toml {cargo_version!r}")

packages = server.get("packages", [])
mcpbs = [p for p in packages if p.get("registryType") == "mcpb"]
ocis = [p for p in packages if p.get("registryType") == "oci"]
if not mcpbs:
    fail("server.json has no mcpb package")
prefix = f"{REPO}/releases/download/v{cargo_version}/"
for p in mcpbs:
    url = p.get("identifier", "")
    if not url.startswith(prefix) or "mcp" not in url.lower():
        fail(f"mcpb identifier {url!r} is not a release asset under {prefix} containing 'mcp'")
    if p.get("version", cargo_version) != cargo_version:
        fail(f"mcpb package version {p.get('version')!r} != {cargo_version!r}")
    if (p.get("transport") or {}).get("type") != "stdio":
        fail(f"mcpb package {url} does not declare the stdio transport")
    bundle = os.path.join(outdir, url.rsplit("/", 1)[-1])
    if not os.path.isfile(bundle):
        fail(f"the bundle {bundle} named by {url} is not in {outdir}")
        continue
    with open(bundle, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    if p.get("fileSha256") != digest:
        fail(f"fileSha256 {p.get('fileSha256')!r} of {url} != sha256 of {bundle} ({digest})")
    with zipfile.ZipFile(bundle) as z:
        manifest = json.loads(z.read("manifest.json"))
        if manifest.get("version") != cargo_version:
            fail(f"{bundle}: manifest version {manifest.get('version')!r} != {cargo_version!r}")
        entry = manifest.get("server", {}).get("entry_point", "")
        try:
            info = z.getinfo(entry)
            if not (info.external_attr >> 16) & stat.S_IXUSR:
                fail(f"{bundle}: {entry} is not executable")
        except KeyError:
            fail(f"{bundle}: the entry point {entry!r} is not in the bundle")
if [p.get("identifier") for p in ocis] != [f"ghcr.io/continuity-hq/continuity:{cargo_version}"]:
    fail(f"the oci package is not ghcr.io/continuity-hq/continuity:{cargo_version}: {[p.get('identifier') for p in ocis]}")
done(f"versions ({cargo_version}), bundles and fileSha256")

# --- ownership line
with open(os.path.join(root, "README.md"), encoding="utf-8") as f:
    readme = f.read()
if f"mcp-name: {NAME}" not in readme:
    fail(f"README.md lacks the registry's ownership line `mcp-name: {NAME}`")
done("README.md ownership line")
EOF
