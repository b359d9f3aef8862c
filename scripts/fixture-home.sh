#!/usr/bin/env bash
# scripts/fixture-home.sh - writes the fixture home of this release into
# functions/local/tests/fixtures/homes/<version>/, for the upgrade test
# (functions/local/tests/upgrade.rs) to open with every later build. Run it once per
# release, with that release's binary, and commit the folder; never change an old one.
#
#   scripts/fixture-home.sh [BINARY]      # default: cargo build -p continuity, debug
#
# The home holds what the test checks: the `local` tenant and its owner key, a Spine
# entity (account acme), two personal memories imported from JSONL, a user. It uses
# the hashing embedder (no model in the fixture).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
BIN="${1:-}"
if [ -z "$BIN" ]; then
  cargo build --quiet -p continuity --bin continuity
  BIN="${CARGO_TARGET_DIR:-$ROOT/target}/debug/continuity"
fi
VERSION="$("$BIN" --version | awk '{print $2}')"
OUT="$ROOT/functions/local/tests/fixtures/homes/$VERSION"
if [ -e "$OUT" ]; then
  echo "error: $OUT exists; a release's fixture home is never rewritten" >&2
  exit 1
fi
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
HOME_DIR="$TMP/home"
c() { "$BIN" --home "$HOME_DIR" --embedder hashing "$@"; }
c init >/dev/null
c entity put --tenant local --type account --id acme --attributes '{"name":"Acme Corp","tier":"gold"}' >/dev/null
cat >"$TMP/memories.jsonl" <<'JSONL'
{"text": "Acme renews its contract every March; the champion is Dana Whitfield.", "metadata": {"source": "fixture"}, "created_at": "2026-11-02T09:30:00Z"}
{"text": "The quarterly review with Acme moved to Thursdays at 10:00.", "metadata": {"source": "fixture"}, "created_at": "2026-11-20T14:00:00Z"}
JSONL
c import "$TMP/memories.jsonl" --format jsonl >/dev/null
printf 'fixture-password-1\n' | c user add --tenant local --email dana@example.com >/dev/null
# Fold the write-ahead logs into the database files so the folder is self-contained.
python3 - "$HOME_DIR" <<'PY'
import sqlite3, sys, pathlib
home = pathlib.Path(sys.argv[1])
for name in ("continuity.db", "fortress.db"):
    con = sqlite3.connect(home / name)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
PY
rm -f "$HOME_DIR"/*.db-wal "$HOME_DIR"/*.db-shm
rm -rf "$HOME_DIR/imports"
mkdir -p "$(dirname "$OUT")"
cp -a "$HOME_DIR" "$OUT"
echo "wrote $OUT ($(du -sh "$OUT" | cut -f1))"
