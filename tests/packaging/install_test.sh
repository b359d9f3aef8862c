#!/usr/bin/env bash
# tests/packaging/install_test.sh DIST - the installer against a release folder.
#
#   scripts/release.sh --out dist && tests/packaging/install_test.sh dist
#
# DIST is what scripts/release.sh writes: continuity-<version>-<target>.tar.gz (.zip
# for Windows) and SHA256SUMS. The test serves DIST on loopback with python3's
# http.server (a mirror, as --base-url takes one), and checks with this machine's
# archive:
#   - shellcheck -s sh passes on scripts/install.sh;
#   - DIST/SHA256SUMS matches the archives, and each .tar.gz holds one folder
#     continuity-<version>-<target>/ with continuity, README.md, LICENSE, CHANGELOG.md
#     and a SHA256SUMS that matches them;
#   - `dash scripts/install.sh --base-url ... --bin-dir ...` (HOME and bin folder in a
#     temporary folder, the bin folder not on PATH) installs a binary whose --version
#     starts with `continuity <version of Cargo.toml>`, says how to put it on PATH and
#     names the next commands; how long it took is printed, never judged;
#   - the same with wget instead of curl (when wget is installed);
#   - the installed binary serves: `continuity serve --embedder hashing` answers
#     /healthz 200 within 60 s;
#   - a mirror whose archive bytes were changed (SHA256SUMS kept) is refused, naming the
#     checksum, and installs nothing;
#   - an unreachable base URL, a base URL without a release (404) and an unsupported
#     platform each fail with a message that says so, and install nothing.
# Each check prints `ok - ...` or `not ok - ...`; the exit status is non-zero when any
# failed. Needs bash, dash, python3, curl, tar, sha256sum and shellcheck (tests/run.sh
# installs them).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
INSTALLER="$ROOT/scripts/install.sh"

if [ "$#" -ne 1 ] || [ ! -d "$1" ]; then
  echo "usage: tests/packaging/install_test.sh DIST   (DIST: the folder scripts/release.sh wrote)" >&2
  exit 2
fi
DIST="$(cd "$1" && pwd)"

PASSED=0
FAILED=0
ok() {
  PASSED=$((PASSED + 1))
  printf 'ok - %s\n' "$*"
}
not_ok() {
  FAILED=$((FAILED + 1))
  printf 'not ok - %s\n' "$1"
  shift
  local line
  for line in "$@"; do
    printf '#   %s\n' "$line"
  done
}
# Indents a file's lines as TAP diagnostics.
diag() { sed 's/^/#   /' "$1" | tail -n "${2:-20}"; }

for tool in dash python3 curl tar sha256sum; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "not ok - '$tool' is missing: tests/run.sh installs it (apt-get install $tool)" >&2
    exit 1
  fi
done

# ------------------------------------------------------------- state, cleanup

# Resolved (pwd -P), as the installer prints the bin folder.
TMP="$(cd "$(mktemp -d)" && pwd -P)"
PIDS=()
cleanup() {
  local pid
  for pid in "${PIDS[@]}"; do
    kill -TERM "$pid" 2>/dev/null || true
  done
  for pid in "${PIDS[@]}"; do
    local n=0
    while kill -0 "$pid" 2>/dev/null && [ "$n" -lt 50 ]; do
      sleep 0.1
      n=$((n + 1))
    done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# The version the installed binary must report: [workspace.package] in Cargo.toml.
VERSION="$(awk '
  /^\[/ { in_section = ($0 == "[workspace.package]") }
  in_section && $1 == "version" { gsub(/"/, "", $3); print $3; exit }' "$ROOT/Cargo.toml")"
if [ -z "$VERSION" ]; then
  echo "not ok - no version in [workspace.package] of $ROOT/Cargo.toml" >&2
  exit 1
fi
echo "# continuity $VERSION from $DIST"

# A free loopback port (closed again: the next bind takes it).
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# serve_dir DIR: serves DIR on loopback and sets SERVED_URL (not printed: a command
# substitution would run it in a subshell, and PIDS would not learn the server's id).
# The port is chosen by the server itself (port 0) and read from its first line, so no
# other process can take it.
SERVED_URL=""
serve_dir() {
  local dir="$1" log
  log="$(mktemp "$TMP/httpd.XXXXXX")"
  python3 -u -m http.server 0 --bind 127.0.0.1 --directory "$dir" >"$log" 2>&1 &
  PIDS+=("$!")
  local n=0 port=""
  while [ "$n" -lt 100 ]; do
    port="$(sed -n 's/.* port \([0-9][0-9]*\).*/\1/p' "$log" | head -n 1)"
    [ -n "$port" ] && break
    sleep 0.1
    n=$((n + 1))
  done
  if [ -z "$port" ]; then
    echo "not ok - python3 -m http.server did not start" >&2
    diag "$log" >&2
    exit 1
  fi
  SERVED_URL="http://127.0.0.1:$port"
}

now_us() { local t="${EPOCHREALTIME/[.,]/}"; printf '%s' "$((10#$t))"; }

# The host's PATH without any folder of TMP (the bin folders must not be on it).
BASE_PATH="$PATH"

# run_installer NAME BIN_DIR BASE_URL [PATH]: runs the installer under dash with a
# fresh HOME; output in $TMP/NAME.out, exit status in $TMP/NAME.rc.
run_installer() {
  local name="$1" bin_dir="$2" url="$3" path="${4:-$BASE_PATH}"
  mkdir -p "$TMP/home-$name"
  local rc=0
  env -u CONTINUITY_INSTALL_BASE_URL -u CONTINUITY_INSTALL_DIR -u CONTINUITY_INSTALL_VERSION \
    HOME="$TMP/home-$name" PATH="$path" SHELL=/bin/bash \
    dash "$INSTALLER" --base-url "$url" --bin-dir "$bin_dir" >"$TMP/$name.out" 2>&1 </dev/null || rc=$?
  echo "$rc" >"$TMP/$name.rc"
}

# A bin folder that holds nothing (no binary, no half-copied temporary file).
bin_dir_empty() { [ ! -d "$1" ] || [ -z "$(find "$1" -mindepth 1 | head -n 1)" ]; }

# ------------------------------------------------------------------ shellcheck

if ! command -v shellcheck >/dev/null 2>&1; then
  not_ok "shellcheck -s sh scripts/install.sh: shellcheck is not installed (tests/run.sh installs it: apt-get install shellcheck)"
elif shellcheck -s sh "$INSTALLER" >"$TMP/shellcheck.out" 2>&1; then
  ok "shellcheck -s sh scripts/install.sh"
else
  not_ok "shellcheck -s sh scripts/install.sh" "$(cat "$TMP/shellcheck.out")"
fi

# ---------------------------------------------------------------- DIST itself

if [ ! -f "$DIST/SHA256SUMS" ]; then
  not_ok "DIST has SHA256SUMS ($DIST/SHA256SUMS is missing)"
elif (cd "$DIST" && sha256sum --check --strict --quiet SHA256SUMS) >"$TMP/sums.out" 2>&1; then
  ok "DIST/SHA256SUMS matches its $(wc -l <"$DIST/SHA256SUMS" | tr -d ' ') files"
else
  not_ok "DIST/SHA256SUMS matches the files" "$(cat "$TMP/sums.out")"
fi

shopt -s nullglob
archives=("$DIST"/continuity-"$VERSION"-*.tar.gz)
shopt -u nullglob
if [ "${#archives[@]}" -eq 0 ]; then
  not_ok "DIST holds continuity-$VERSION-<target>.tar.gz archives (none found)"
fi
for a in "${archives[@]}"; do
  name="$(basename "$a" .tar.gz)"
  listing="$TMP/$name.list"
  if ! tar -tzf "$a" >"$listing" 2>&1; then
    not_ok "$name.tar.gz is a gzip tar" "$(tail -n 3 "$listing")"
    continue
  fi
  problems=()
  if grep -v "^$name/" "$listing" | grep -q .; then
    problems+=("entries outside $name/: $(grep -v "^$name/" "$listing" | head -n 3 | tr '\n' ' ')")
  fi
  for f in continuity README.md LICENSE CHANGELOG.md SHA256SUMS; do
    grep -qx "$name/$f" "$listing" || problems+=("no $name/$f")
  done
  if [ "${#problems[@]}" -eq 0 ]; then
    mkdir -p "$TMP/layout"
    tar -xzf "$a" -C "$TMP/layout"
    if ! (cd "$TMP/layout/$name" && sha256sum --check --strict --quiet SHA256SUMS) >"$TMP/inner.out" 2>&1; then
      problems+=("its SHA256SUMS does not match: $(head -n 3 "$TMP/inner.out" | tr '\n' ' ')")
    elif [ ! -x "$TMP/layout/$name/continuity" ]; then
      problems+=("$name/continuity is not executable")
    fi
    rm -rf "${TMP:?}/layout"
  fi
  if [ "${#problems[@]}" -eq 0 ]; then
    ok "$name.tar.gz: one folder with continuity, README.md, LICENSE, CHANGELOG.md and a matching SHA256SUMS"
  else
    not_ok "$name.tar.gz layout" "${problems[@]}"
  fi
done

# -------------------------------------------------------------- the install

serve_dir "$DIST"
URL="$SERVED_URL"
echo "# serving $DIST at $URL"
BIN="$TMP/bin"
case ":$BASE_PATH:" in
  *":$BIN:"*) not_ok "the bin folder is not on PATH" ;;
esac

t0="$(now_us)"
run_installer install "$BIN" "$URL"
dt=$(($(now_us) - t0))
secs="$(printf '%d.%02d' "$((dt / 1000000))" "$(((dt % 1000000) / 10000))")"
INSTALLED=0
if [ "$(cat "$TMP/install.rc")" = 0 ] && [ -x "$BIN/continuity" ]; then
  INSTALLED=1
  ok "dash scripts/install.sh --base-url $URL installs $BIN/continuity (took ${secs} s)"
else
  not_ok "dash scripts/install.sh --base-url $URL --bin-dir $BIN (exit $(cat "$TMP/install.rc"), ${secs} s)" \
    "$(cat "$TMP/install.out")"
fi

if [ "$INSTALLED" = 1 ]; then
  version_out="$("$BIN/continuity" --version 2>&1 || true)"
  case "$version_out" in
    "continuity $VERSION"*) ok "continuity --version: $version_out" ;;
    *) not_ok "continuity --version starts with 'continuity $VERSION'" "it printed: $version_out" ;;
  esac
  leftovers="$(find "$BIN" -mindepth 1 -maxdepth 1 ! -name continuity | tr '\n' ' ')"
  if [ -z "$leftovers" ]; then
    ok "the bin folder holds only continuity (no temporary file left)"
  else
    not_ok "the bin folder holds only continuity" "also: $leftovers"
  fi
  if grep -q "is not on your PATH" "$TMP/install.out" && grep -q "export PATH=\"$BIN:" "$TMP/install.out"; then
    ok "the installer says how to put $BIN on PATH"
  else
    not_ok "the installer says how to put $BIN on PATH" "$(cat "$TMP/install.out")"
  fi
  if grep -q "continuity serve" "$TMP/install.out" && grep -q "continuity setup --client claude-code" "$TMP/install.out"; then
    ok "the installer names the next commands (serve, setup --client claude-code)"
  else
    not_ok "the installer names the next commands" "$(cat "$TMP/install.out")"
  fi
  if grep -qF "installed $version_out" "$TMP/install.out"; then
    ok "the installer prints the installed version"
  else
    not_ok "the installer prints the installed version" "$(cat "$TMP/install.out")"
  fi
fi

# The same with wget: a PATH of links to every tool of the host PATH but curl.
if command -v wget >/dev/null 2>&1; then
  NOCURL="$TMP/path-nocurl"
  mkdir -p "$NOCURL"
  IFS=: read -r -a path_dirs <<<"$BASE_PATH"
  for d in "${path_dirs[@]}"; do
    [ -d "$d" ] || continue
    for f in "$d"/*; do
      n="${f##*/}"
      if [ "$n" != curl ] && [ -x "$f" ] && [ ! -e "$NOCURL/$n" ]; then
        ln -s "$f" "$NOCURL/$n"
      fi
    done
  done
  run_installer wget "$TMP/bin-wget" "$URL" "$NOCURL"
  if [ "$(cat "$TMP/wget.rc")" = 0 ] && [ -x "$TMP/bin-wget/continuity" ]; then
    ok "with wget and no curl on PATH, the installer installs continuity"
  else
    not_ok "with wget and no curl, the installer installs continuity (exit $(cat "$TMP/wget.rc"))" "$(cat "$TMP/wget.out")"
  fi
else
  ok "the wget download path # SKIP wget is not installed"
fi

# ---------------------------------------------------------- the binary serves

if [ "$INSTALLED" = 1 ]; then
  PORT2="$(free_port)"
  mkdir -p "$TMP/home-serve"
  HOME="$TMP/home-serve" "$BIN/continuity" serve --home "$TMP/h" --addr "127.0.0.1:$PORT2" --embedder hashing \
    >"$TMP/serve.log" 2>&1 </dev/null &
  SERVE_PID=$!
  PIDS+=("$SERVE_PID")
  t0="$(now_us)"
  status=""
  while [ $(($(now_us) - t0)) -lt 60000000 ]; do
    status="$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://127.0.0.1:$PORT2/healthz" 2>/dev/null || true)"
    [ "$status" = 200 ] && break
    kill -0 "$SERVE_PID" 2>/dev/null || break
    sleep 0.25
  done
  dt=$(($(now_us) - t0))
  if [ "$status" = 200 ]; then
    ok "continuity serve --embedder hashing answers /healthz 200 (after $((dt / 1000)) ms)"
  elif ! kill -0 "$SERVE_PID" 2>/dev/null; then
    not_ok "continuity serve answers /healthz 200: it exited first" "$(tail -n 20 "$TMP/serve.log")"
  else
    not_ok "continuity serve answers /healthz 200 within 60 s (last status: ${status:-none})" "$(tail -n 20 "$TMP/serve.log")"
  fi
  kill -TERM "$SERVE_PID" 2>/dev/null || true
  n=0
  while kill -0 "$SERVE_PID" 2>/dev/null && [ "$n" -lt 100 ]; do
    sleep 0.1
    n=$((n + 1))
  done
  if kill -0 "$SERVE_PID" 2>/dev/null; then
    not_ok "continuity serve stops on SIGTERM within 10 s"
    kill -KILL "$SERVE_PID" 2>/dev/null || true
  else
    ok "continuity serve stops on SIGTERM"
  fi
  wait "$SERVE_PID" 2>/dev/null || true
else
  not_ok "continuity serve answers /healthz 200: not run, nothing was installed"
fi

# ------------------------------------------------------------- refusals

# A corrupted mirror: every archive's bytes changed in the middle, SHA256SUMS kept.
BAD="$TMP/bad-mirror"
cp -R "$DIST" "$BAD"
python3 - "$BAD" <<'PY'
import pathlib, sys
for p in pathlib.Path(sys.argv[1]).iterdir():
    if p.name.endswith((".tar.gz", ".zip")):
        data = bytearray(p.read_bytes())
        mid = len(data) // 2
        for i in range(mid, min(mid + 16, len(data))):
            data[i] ^= 0xFF
        p.write_bytes(bytes(data))
PY
serve_dir "$BAD"
BAD_URL="$SERVED_URL"
run_installer corrupt "$TMP/bin-corrupt" "$BAD_URL"
if [ "$(cat "$TMP/corrupt.rc")" != 0 ] && grep -qi "checksum" "$TMP/corrupt.out" && bin_dir_empty "$TMP/bin-corrupt"; then
  ok "a corrupted archive is refused: $(grep -i -m1 checksum "$TMP/corrupt.out" | cut -c1-100)..."
else
  not_ok "a corrupted archive is refused (non-zero exit, a message naming the checksum, nothing installed)" \
    "exit $(cat "$TMP/corrupt.rc"); bin folder: $(find "$TMP/bin-corrupt" -mindepth 1 2>/dev/null | tr '\n' ' ')" \
    "$(cat "$TMP/corrupt.out")"
fi

# An unreachable base URL: a loopback port nothing listens on.
DEAD_URL="http://127.0.0.1:$(free_port)/continuity"
run_installer unreachable "$TMP/bin-unreachable" "$DEAD_URL"
if [ "$(cat "$TMP/unreachable.rc")" != 0 ] && grep -q "could not download $DEAD_URL/SHA256SUMS" "$TMP/unreachable.out" &&
  grep -qi "network" "$TMP/unreachable.out" && bin_dir_empty "$TMP/bin-unreachable"; then
  ok "an unreachable base URL fails clearly: $(grep -m1 'error' "$TMP/unreachable.out" | cut -c1-110)..."
else
  not_ok "an unreachable base URL fails with a message naming the URL and the network" \
    "exit $(cat "$TMP/unreachable.rc")" "$(cat "$TMP/unreachable.out")"
fi

# A base URL that answers, but holds no release (404).
run_installer missing "$TMP/bin-missing" "$URL/no-such-release"
if [ "$(cat "$TMP/missing.rc")" != 0 ] && grep -q "no release found" "$TMP/missing.out" && grep -q "404" "$TMP/missing.out" &&
  bin_dir_empty "$TMP/bin-missing"; then
  ok "a base URL without a release (404) fails clearly"
else
  not_ok "a base URL without a release (404) fails with 'no release found'" \
    "exit $(cat "$TMP/missing.rc")" "$(cat "$TMP/missing.out")"
fi

# An unsupported platform: uname says FreeBSD.
FAKE="$TMP/path-freebsd"
mkdir -p "$FAKE"
cat >"$FAKE/uname" <<'SH'
#!/bin/sh
case "$1" in -m) echo amd64 ;; *) echo FreeBSD ;; esac
SH
chmod +x "$FAKE/uname"
run_installer freebsd "$TMP/bin-freebsd" "$URL" "$FAKE:$BASE_PATH"
if [ "$(cat "$TMP/freebsd.rc")" != 0 ] && grep -q "FreeBSD" "$TMP/freebsd.out" &&
  grep -q "cargo install --locked --git https://github.com/continuity-hq/continuity continuity" "$TMP/freebsd.out" &&
  bin_dir_empty "$TMP/bin-freebsd"; then
  ok "an unsupported platform (FreeBSD) is named, with the build-from-source command"
else
  not_ok "an unsupported platform is named, with the build-from-source command" \
    "exit $(cat "$TMP/freebsd.rc")" "$(cat "$TMP/freebsd.out")"
fi

echo "install_test: $PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
