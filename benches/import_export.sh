#!/usr/bin/env bash
# `continuity import` and `continuity export` on a fresh home with the release binary:
# the reference server's memory.jsonl of N entities and 1.5 N relations, then N mem0
# memories (personal memory, indexed with the lexical `hashing` embedder so the figure
# is the import's, not the model's), then an export of the bundle. Prints items/s.
#
#   benches/import_export.sh [N]     (default 10000)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
CACHE="${CONTINUITY_CACHE:-$HOME/.cache/continuity}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$CACHE/target}"
cargo build --release --quiet -p continuity --bin continuity
python3 "$ROOT/benches/import_export.py" "$CARGO_TARGET_DIR/release/continuity" "${1:-10000}"
