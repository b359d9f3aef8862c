#!/bin/sh
# scripts/install.sh - installs the `continuity` binary from a GitHub release (or a
# mirror of one) for Linux and macOS, x86_64 and aarch64, without root.
#
#   curl -fsSL https://github.com/continuity-hq/continuity/releases/latest/download/install.sh | sh
#   curl -fsSL .../install.sh | sh -s -- --version 0.1.0 --bin-dir ~/bin
#   sh scripts/install.sh --base-url https://mirror.example.com/continuity/v0.1.0
#
# What it does: reads the release's SHA256SUMS, picks the archive of this platform
# (Linux: the static musl build, else the glibc one; macOS: the apple-darwin build),
# downloads it with curl or wget, checks its SHA-256 (a mismatch installs nothing),
# unpacks it in a temporary folder (removed on exit), checks that the binary runs here,
# and moves it into the bin folder in one step (a running `continuity` is never left
# half-written). POSIX sh: it runs under dash, bash, zsh, busybox ash and macOS /bin/sh.
#
# Environment (flags win):
#   CONTINUITY_INSTALL_BASE_URL   where SHA256SUMS and the archives are (a mirror)
#   CONTINUITY_INSTALL_DIR        the bin folder (default $HOME/.local/bin)
#   CONTINUITY_INSTALL_VERSION    the release to install (default: the latest)
set -eu

REPO_URL="https://github.com/continuity-hq/continuity"
FROM_SOURCE="cargo install --locked --git $REPO_URL continuity"
ME="continuity-install"

usage() {
  cat <<EOF
Install the continuity binary (Continuity, the MCP memory server) for this user.

Usage: install.sh [--version V] [--base-url URL] [--bin-dir DIR]

Options:
  --version V     install release V (e.g. 0.1.0 or v0.1.0); default: the latest
                  release. Env: CONTINUITY_INSTALL_VERSION
  --base-url URL  download SHA256SUMS and the archive from URL (a mirror of a
                  release's assets); default:
                    $REPO_URL/releases/latest/download
                  or, with --version V, $REPO_URL/releases/download/vV
                  Env: CONTINUITY_INSTALL_BASE_URL
  --bin-dir DIR   install into DIR (created if missing; no root needed);
                  default: \$HOME/.local/bin. Env: CONTINUITY_INSTALL_DIR
  -h, --help      show this help

Platforms: Linux and macOS on x86_64 (amd64) or aarch64 (arm64). Windows: use
install.ps1. Anything else: build from source with
  $FROM_SOURCE
EOF
}

say() { printf '%s\n' "$*"; }
warn() { printf '%s: warning: %s\n' "$ME" "$*" >&2; }
die() {
  printf '%s: error: %s\n' "$ME" "$1" >&2
  shift
  for line in "$@"; do
    printf '  %s\n' "$line" >&2
  done
  exit 1
}

# ------------------------------------------------------------------ arguments

version="${CONTINUITY_INSTALL_VERSION:-}"
base_url="${CONTINUITY_INSTALL_BASE_URL:-}"
bin_dir="${CONTINUITY_INSTALL_DIR:-}"

need_value() {
  if [ "$2" -lt 2 ]; then
    die "$1 needs a value" "run with --help for the options"
  fi
}

while [ "$#" -gt 0 ]; do
  case "$1" in
    -h | --help)
      usage
      exit 0
      ;;
    --version)
      need_value "$1" "$#"
      version="$2"
      shift 2
      ;;
    --version=*)
      version="${1#*=}"
      shift
      ;;
    --base-url)
      need_value "$1" "$#"
      base_url="$2"
      shift 2
      ;;
    --base-url=*)
      base_url="${1#*=}"
      shift
      ;;
    --bin-dir)
      need_value "$1" "$#"
      bin_dir="$2"
      shift 2
      ;;
    --bin-dir=*)
      bin_dir="${1#*=}"
      shift
      ;;
    *)
      die "unknown argument: $1" "run with --help for the options"
      ;;
  esac
done

version="${version#v}"
if [ -z "$bin_dir" ]; then
  if [ -z "${HOME:-}" ]; then
    die "HOME is not set, so there is no default bin folder" "name one: --bin-dir DIR (or CONTINUITY_INSTALL_DIR=DIR)"
  fi
  bin_dir="$HOME/.local/bin"
fi
if [ -z "$base_url" ]; then
  if [ -n "$version" ]; then
    base_url="$REPO_URL/releases/download/v$version"
  else
    base_url="$REPO_URL/releases/latest/download"
  fi
fi
# Trailing slashes would double in the URLs.
while :; do
  case "$base_url" in
    */) base_url="${base_url%/}" ;;
    *) break ;;
  esac
done

# ------------------------------------------------------------------- platform

unsupported() {
  die "there is no prebuilt continuity for $1" \
    "prebuilt archives exist for Linux and macOS on x86_64 and aarch64 (install.sh), and Windows x86_64 (install.ps1)." \
    "Build it from source instead (needs Rust 1.88+ from https://rustup.rs):" \
    "  $FROM_SOURCE"
}

os="$(uname -s 2>/dev/null || echo unknown)"
os_name="$os"
[ "$os" = "Darwin" ] && os_name="macOS"
machine="$(uname -m 2>/dev/null || echo unknown)"
case "$machine" in
  x86_64 | amd64 | x64) arch="x86_64" ;;
  aarch64 | arm64) arch="aarch64" ;;
  *) arch="" ;;
esac

targets=""
case "$os" in
  Linux)
    [ -n "$arch" ] || unsupported "Linux on $machine"
    targets="$arch-unknown-linux-musl"
    # The glibc build is the fallback where no static build is published; on a musl
    # system (Alpine) it would not run, so it is not offered there.
    if ! { ldd --version 2>&1 || true; } | grep -qi musl; then
      targets="$targets $arch-unknown-linux-gnu"
    fi
    ;;
  Darwin)
    [ -n "$arch" ] || unsupported "macOS on $machine"
    # A shell under Rosetta sees x86_64 on Apple silicon: install the native build.
    if [ "$arch" = "x86_64" ] && [ "$(sysctl -n sysctl.proc_translated 2>/dev/null || echo 0)" = "1" ]; then
      arch="aarch64"
    fi
    targets="$arch-apple-darwin"
    ;;
  MINGW* | MSYS* | CYGWIN* | Windows_NT)
    die "this is Windows ($os): use the PowerShell installer instead" \
      "powershell -ExecutionPolicy Bypass -c \"irm $REPO_URL/releases/latest/download/install.ps1 | iex\""
    ;;
  *)
    unsupported "$os on $machine"
    ;;
esac

# ---------------------------------------------------------------------- tools

downloader=""
if command -v curl >/dev/null 2>&1; then
  downloader="curl"
elif command -v wget >/dev/null 2>&1; then
  downloader="wget"
else
  die "neither curl nor wget is installed; one of them is needed to download the release" \
    "install one (Debian/Ubuntu: sudo apt-get install curl; Fedora: sudo dnf install curl; Alpine: apk add curl) and run this again"
fi
wget_is_busybox=0
if [ "$downloader" = "wget" ] && { wget --help 2>&1 || true; } | grep -qi busybox; then
  wget_is_busybox=1
fi

hasher=""
if command -v sha256sum >/dev/null 2>&1; then
  hasher="sha256sum"
elif command -v shasum >/dev/null 2>&1; then
  hasher="shasum"
elif command -v openssl >/dev/null 2>&1; then
  hasher="openssl"
else
  die "no SHA-256 tool found (sha256sum, shasum or openssl); the download cannot be verified" \
    "install coreutils (sha256sum) or perl (shasum) and run this again"
fi

for tool in tar gzip mktemp uname awk; do
  command -v "$tool" >/dev/null 2>&1 || die "the '$tool' command is missing; it is needed to unpack the release" \
    "install it with your package manager and run this again"
done

# ------------------------------------------------------------ temporary state

tmp=""
staged=""
cleanup() {
  if [ -n "$staged" ] && [ -e "$staged" ]; then
    rm -f "$staged"
  fi
  if [ -n "$tmp" ] && [ -d "$tmp" ]; then
    rm -rf "$tmp"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP

tmp="$(mktemp -d 2>/dev/null || mktemp -d -t continuity-install)" || die "could not create a temporary folder" "check that \$TMPDIR (or /tmp) is writable"

# --------------------------------------------------------------- downloading

# download URL FILE WHAT: fetches URL into FILE, or stops with why (HTTP status,
# unreachable host, TLS) and what to do.
download() {
  dl_url="$1"
  dl_out="$2"
  dl_what="$3"
  dl_err="$tmp/download.err"
  dl_rc=0
  dl_status=""
  if [ "$downloader" = "curl" ]; then
    dl_progress="-sS"
    if [ "$dl_what" = "archive" ] && [ -t 2 ]; then
      dl_progress="--progress-bar"
    fi
    dl_status="$(curl "$dl_progress" -L --connect-timeout 20 --retry 2 -o "$dl_out" -w '%{http_code}' "$dl_url" 2>"$dl_err")" || dl_rc=$?
    if [ "$dl_rc" -eq 0 ] && [ "$dl_status" != "200" ]; then
      dl_rc=22
    fi
  else
    # -S: the status lines go to stderr (busybox wget too). Busybox has no -t, and
    # Debian's busybox 1.35 wget crashes on -T: the timeout is for GNU wget only.
    if [ "$wget_is_busybox" = 1 ]; then
      wget -S -q -O "$dl_out" "$dl_url" 2>"$dl_err" || dl_rc=$?
    else
      wget -S -q -T 20 -O "$dl_out" "$dl_url" 2>"$dl_err" || dl_rc=$?
    fi
    dl_status="$(awk '$1 ~ /^HTTP\// { code = $2 } END { print code }' "$dl_err")"
    case "$dl_rc" in
      4) printf 'wget: network failure (name not resolved, connection refused or timed out)\n' >>"$dl_err" ;;
      5) printf 'wget: TLS certificate verification failed\n' >>"$dl_err" ;;
    esac
  fi
  [ "$dl_rc" -eq 0 ] && return 0
  rm -f "$dl_out"
  dl_detail="$(grep -v '^ ' "$dl_err" 2>/dev/null | grep -v '^$' | tail -n 1 || true)"
  case "$dl_status" in
    404)
      if [ "$dl_what" = "SHA256SUMS" ]; then
        die "no release found at $base_url (HTTP 404 for $dl_url)" \
          "is the version right? The releases are listed at $REPO_URL/releases" \
          "a mirror given with --base-url must hold SHA256SUMS and the archives side by side"
      fi
      die "the release lists $(basename "$dl_out") but the download answered HTTP 404 ($dl_url)" \
        "the release may still be uploading: try again in a few minutes"
      ;;
    [45][0-9][0-9])
      die "downloading $dl_url failed: the server answered HTTP $dl_status" \
        "try again later, or use a mirror with --base-url URL"
      ;;
  esac
  die "could not download $dl_url${dl_detail:+ ($dl_detail)}" \
    "check the network connection (and a proxy: https_proxy / HTTPS_PROXY), or use a reachable mirror with --base-url URL"
}

sha256_of() {
  case "$hasher" in
    sha256sum) sha256sum "$1" | awk '{ print $1 }' ;;
    shasum) shasum -a 256 "$1" | awk '{ print $1 }' ;;
    openssl) openssl dgst -sha256 "$1" | awk '{ print $NF }' ;;
  esac
}

say "continuity installer: $os_name $machine, from $base_url"

sums="$tmp/SHA256SUMS"
download "$base_url/SHA256SUMS" "$sums" "SHA256SUMS"

# The archive of this platform: the first target (in order of preference) that the
# release lists; with a version, that version's archive exactly.
archive=""
expected=""
for target in $targets; do
  line="$(awk -v ver="$version" -v target="$target" '
    {
      name = $2
      sub(/^\*/, "", name)
      suffix = "-" target ".tar.gz"
      if (index(name, "continuity-") != 1 || index(name, "/") != 0) next
      if (length(name) <= length(suffix)) next
      if (substr(name, length(name) - length(suffix) + 1) != suffix) next
      if (ver != "" && name != "continuity-" ver suffix) next
      print $1, name
    }' "$sums")"
  [ -n "$line" ] || continue
  count="$(printf '%s\n' "$line" | wc -l | tr -d ' ')"
  if [ "$count" -gt 1 ]; then
    die "SHA256SUMS at $base_url lists $count archives for $target" "name the one to install with --version V"
  fi
  expected="${line%% *}"
  archive="${line#* }"
  break
done

if [ -z "$archive" ]; then
  if ! grep -q 'continuity-' "$sums"; then
    die "$base_url/SHA256SUMS lists no continuity archive; is that the right address?" \
      "a mirror given with --base-url must hold SHA256SUMS and the archives side by side"
  fi
  platform="$os_name $machine ($(printf '%s' "$targets" | sed 's/ / or /g'))"
  if [ -n "$version" ]; then
    others="$(awk '{ name = $2; sub(/^\*/, "", name); if (index(name, "continuity-") == 1) print name }' "$sums" | tr '\n' ' ')"
    die "the release at $base_url has no version $version for $platform" \
      "it lists: $others" \
      "leave out --version (or pick one of those), or point --base-url at that version's assets"
  fi
  die "the release at $base_url has no archive for $platform" \
    "build it from source instead (needs Rust 1.88+ from https://rustup.rs):" \
    "  $FROM_SOURCE"
fi

case "$expected" in
  *[!0-9a-fA-F]*) die "SHA256SUMS has a malformed digest for $archive: $expected" ;;
esac
if [ "${#expected}" -ne 64 ]; then
  die "SHA256SUMS has a malformed digest for $archive: $expected"
fi

say "downloading $archive"
download "$base_url/$archive" "$tmp/$archive" "archive"

actual="$(sha256_of "$tmp/$archive")"
expected_lc="$(printf '%s' "$expected" | tr 'A-F' 'a-f')"
if [ "$actual" != "$expected_lc" ]; then
  die "checksum mismatch for $archive: SHA256SUMS says $expected_lc, the download is $actual" \
    "the download is corrupt or was tampered with; nothing was installed." \
    "Try again; if it persists, report it at $REPO_URL/issues"
fi
say "verified SHA-256 $actual"

# ---------------------------------------------------------------- unpacking

mkdir "$tmp/unpacked"
if ! tar -xzf "$tmp/$archive" -C "$tmp/unpacked" 2>"$tmp/tar.err"; then
  die "could not unpack $archive: $(tail -n 1 "$tmp/tar.err")"
fi
folder="${archive%.tar.gz}"
binary="$tmp/unpacked/$folder/continuity"
if [ ! -f "$binary" ]; then
  die "$archive holds no $folder/continuity; the release is malformed" "report it at $REPO_URL/issues"
fi

# ---------------------------------------------------------------- installing

if ! mkdir -p "$bin_dir" 2>/dev/null || [ ! -w "$bin_dir" ]; then
  die "cannot write to $bin_dir" "choose a folder you own with --bin-dir DIR (no root is needed)"
fi
bin_dir="$(cd "$bin_dir" && pwd -P)"
dest="$bin_dir/continuity"

previous=""
if [ -x "$dest" ]; then
  previous="$("$dest" --version 2>/dev/null | head -n 1 || true)"
fi

# A temporary name in the same folder, renamed over the old binary in one step; it is
# run once first, so a binary that cannot run here replaces nothing.
staged="$bin_dir/.continuity.install.$$"
cp "$binary" "$staged"
chmod 755 "$staged"
installed_version=""
if ver_out="$("$staged" --version 2>"$tmp/version.err")"; then
  installed_version="$(printf '%s\n' "$ver_out" | head -n 1)"
fi
if [ -z "$installed_version" ]; then
  die "the downloaded binary does not run on this machine: $(tail -n 1 "$tmp/version.err" 2>/dev/null)" \
    "nothing was installed. Build it from source instead:" \
    "  $FROM_SOURCE"
fi
mv -f "$staged" "$dest"
staged=""

if [ -n "$previous" ] && [ "$previous" != "$installed_version" ]; then
  say "replaced $previous"
fi
say "installed $installed_version"
say "       at $dest"

# ------------------------------------------------------------------ next steps

cmd="continuity"
case ":${PATH:-}:" in
  *":$bin_dir:"*)
    found="$(command -v continuity 2>/dev/null || true)"
    if [ -n "$found" ] && [ "$found" != "$dest" ]; then
      warn "another continuity comes first on PATH: $found (remove it, or put $bin_dir before it)"
    fi
    ;;
  *)
    cmd="$dest"
    case "${SHELL:-}" in
      */zsh) rc="$HOME/.zshrc" ;;
      */bash) if [ "$os" = "Darwin" ]; then rc="$HOME/.bash_profile"; else rc="$HOME/.bashrc"; fi ;;
      */fish) rc="" ;;
      *) rc="$HOME/.profile" ;;
    esac
    say ""
    say "$bin_dir is not on your PATH. To run plain 'continuity', add it:"
    if [ -z "$rc" ]; then
      say "  fish_add_path $bin_dir"
    else
      say "  echo 'export PATH=\"$bin_dir:\$PATH\"' >> $rc   # then open a new terminal"
    fi
    ;;
esac

say ""
say "Next:"
say "  $cmd serve                        # start the server on http://127.0.0.1:8787"
say "  $cmd setup --client claude-code   # connect Claude Code (or: setup, for every client found)"
