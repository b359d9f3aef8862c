# Sourced by the conformance scripts. `wait_healthy URL LOG…`: waits up to 60 s (a loaded
# machine starts slowly) for URL to answer; otherwise prints the LOG files and exits 1.
wait_healthy() {
  local url="$1"
  shift
  for _ in $(seq 1 600); do
    python3 -c "import urllib.request; urllib.request.urlopen('$url')" 2>/dev/null && return 0
    sleep 0.1
  done
  echo "the server did not answer $url within 60 s:" >&2
  cat "$@" >&2
  exit 1
}
