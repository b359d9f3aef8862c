#!/usr/bin/env bash
# scripts/release.sh - build the release assets of one target into a folder.
#
#   scripts/release.sh [--target TRIPLE] [--out DIR] [--binary PATH] [--no-mcpb]
#
#   --target  the Rust target triple (default: this machine's, `rustc -vV`)
#   --out     where the assets go (default: dist/)
#   --binary  package this already-built `continuity` instead of building one (the test
#             suite packages its debug build this way; a release never does)
#   --no-mcpb skip the Claude Desktop bundle (it needs the mcpb CLI from npm)
#
# Writes, for version V (the workspace version in Cargo.toml) and target T:
#   continuity-V-T.tar.gz (.zip for *-windows-*)  one folder continuity-V-T/ with the
#       binary, README.md, LICENSE, CHANGELOG.md and a SHA256SUMS of those files
#   continuity-V-T.cdx.json   the software bill of materials (CycloneDX JSON, cargo-cyclonedx)
#   continuity-V-T.mcpb       the Claude Desktop bundle (packaging/mcpb/build.sh), unless --no-mcpb
#   SHA256SUMS                every asset of the folder, in `sha256sum` format (merged:
#                             assets of other targets already there are kept)
#
# Without --binary it builds with `cargo auditable build --release --locked`, so the
# binary carries its dependency list (`cargo audit bin`, `rust-audit-info` read it).
# Needs: cargo-auditable and cargo-cyclonedx (`cargo install --locked cargo-auditable
# cargo-cyclonedx`), tar/zip, sha256sum or shasum; for the bundle, node and
# @anthropic-ai/mcpb (MCPB="node …/cli.js", see packaging/mcpb/build.sh).
set -euo pipefail

die() { printf 'release.sh: %s\n' "$*" >&2; exit 1; }
say() { printf '%s\n' "$*" >&2; }

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

TARGET="" OUT="dist" BINARY="" MCPB_BUNDLE=1
while [ "$#" -gt 0 ]; do
  case "$1" in
    --target) TARGET="${2:?--target needs a triple}"; shift 2 ;;
    --out) OUT="${2:?--out needs a folder}"; shift 2 ;;
    --binary) BINARY="${2:?--binary needs a path}"; shift 2 ;;
    --no-mcpb) MCPB_BUNDLE=0; shift ;;
    -h | --help) sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument $1 (see --help)" ;;
  esac
done

VERSION="$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' Cargo.toml)"
[ -n "$VERSION" ] || die "no version in Cargo.toml's [workspace.package]"
HOST="$(rustc -vV | sed -n 's/^host: //p')"
TARGET="${TARGET:-$HOST}"
case "$TARGET" in
  *-windows-*) EXE="continuity.exe" ARCHIVE_EXT="zip" ;;
  *) EXE="continuity" ARCHIVE_EXT="tar.gz" ;;
esac
NAME="continuity-$VERSION-$TARGET"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"

sha256() {
  if command -v sha256sum >/dev/null 2>&1; then sha256sum "$@"; else shasum -a 256 "$@"; fi
}

# 1. The binary.
if [ -n "$BINARY" ]; then
  [ -x "$BINARY" ] || die "--binary $BINARY is not an executable file"
  say "==> packaging the prebuilt $BINARY as $NAME"
else
  cargo auditable --version >/dev/null 2>&1 \
    || die "cargo-auditable is missing: cargo install --locked cargo-auditable"
  say "==> cargo auditable build --release --locked --target $TARGET"
  cargo auditable build --release --locked -p continuity --bin continuity --target "$TARGET"
  BINARY="$TARGET_DIR/$TARGET/release/$EXE"
fi
# The archive's version is Cargo's: checked where the binary runs here.
if [ "$TARGET" = "$HOST" ]; then
  reported="$("$BINARY" --version)"
  case "$reported" in
    "continuity $VERSION "*) say "    $reported" ;;
    *) die "the binary says '$reported', Cargo.toml says $VERSION" ;;
  esac
fi

# 2. The archive: one folder with the binary, the documents and their checksums.
STAGE="$(mktemp -d)"
trap 'rm -rf "$STAGE"' EXIT
mkdir "$STAGE/$NAME"
install -m 0755 "$BINARY" "$STAGE/$NAME/$EXE"
for f in README.md LICENSE CHANGELOG.md; do
  [ -f "$f" ] || die "$f is missing"
  install -m 0644 "$f" "$STAGE/$NAME/$f"
done
(cd "$STAGE/$NAME" && sha256 "$EXE" README.md LICENSE CHANGELOG.md >SHA256SUMS)
ARCHIVE="$NAME.$ARCHIVE_EXT"
rm -f "$OUT/$ARCHIVE"
if [ "$ARCHIVE_EXT" = zip ]; then
  (cd "$STAGE" && zip -qr "$OUT/$ARCHIVE" "$NAME")
else
  # Owner and times fixed, names sorted: the same inputs give the same archive. gzip's
  # default level: -9 took three times as long (22.5 s vs 7.1 s for the tests' 105 MB
  # binary) for an archive 0.8 % smaller.
  (cd "$STAGE" && tar --sort=name --owner=0 --group=0 --numeric-owner --mtime='2000-01-01 00:00:00Z' -cf - "$NAME") \
    | gzip -n -6 >"$OUT/$ARCHIVE"
fi
say "    $OUT/$ARCHIVE"

# 3. The software bill of materials of the continuity package for this target.
cargo cyclonedx --version >/dev/null 2>&1 || die "cargo-cyclonedx is missing: cargo install --locked cargo-cyclonedx"
say "==> cargo cyclonedx (the bill of materials)"
# cargo-cyclonedx writes one file beside each workspace member's Cargo.toml: keep the
# binary's, remove the others.
SBOM_NAME="continuity-release-sbom-$$"
cargo cyclonedx --manifest-path functions/local/Cargo.toml --format json --spec-version 1.5 --no-build-deps -qq \
  --target "$TARGET" --override-filename "$SBOM_NAME"
mv "functions/local/$SBOM_NAME.json" "$OUT/$NAME.cdx.json"
find . -path ./target -prune -o -name "$SBOM_NAME.json" -type f -exec rm -f {} +
say "    $OUT/$NAME.cdx.json"

# 4. The Claude Desktop bundle.
if [ "$MCPB_BUNDLE" = 1 ]; then
  say "==> the MCPB bundle"
  packaging/mcpb/build.sh "$BINARY" "$VERSION" "$TARGET" "$OUT" >/dev/null
  say "    $OUT/$NAME.mcpb"
fi

# 5. SHA256SUMS of every asset in the folder (other targets' kept).
(
  cd "$OUT"
  : >SHA256SUMS.new
  for f in continuity-*.tar.gz continuity-*.zip continuity-*.cdx.json continuity-*.mcpb; do
    if [ -f "$f" ]; then sha256 "$f" >>SHA256SUMS.new; fi
  done
  mv SHA256SUMS.new SHA256SUMS
)
say "    $OUT/SHA256SUMS"
printf '%s\n' "$OUT/$ARCHIVE"
