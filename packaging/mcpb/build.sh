#!/usr/bin/env bash
# packaging/mcpb/build.sh - build the Claude Desktop bundle (MCPB) of one binary.
#
#   packaging/mcpb/build.sh BINARY VERSION TARGET OUTDIR
#
#   BINARY   the built `continuity` executable for TARGET
#   VERSION  the release version (the workspace version in Cargo.toml, e.g. 0.1.0)
#   TARGET   the Rust target triple: *-linux-* -> linux, *-apple-darwin -> darwin,
#            *-windows-* -> win32 (the bundle's compatibility.platforms)
#   OUTDIR   where OUTDIR/continuity-VERSION-TARGET.mcpb is written
#
# Stages manifest.json (this folder's template, with VERSION, the platform and, for
# Windows, the .exe name filled in) and the binary at server/continuity[.exe], then runs
# `mcpb validate` and `mcpb pack`. Offline: the mcpb CLI makes no network request and,
# with a manifest present, asks no question.
#
# Environment:
#   MCPB  the mcpb command line, split on spaces (default: `mcpb` on PATH), e.g.
#         MCPB="node /path/node_modules/@anthropic-ai/mcpb/dist/cli/cli.js"
#   NODE  node, used to rewrite the manifest (default: `node` on PATH)
set -euo pipefail

die() { printf 'mcpb/build.sh: %s\n' "$*" >&2; exit 1; }

[ "$#" -eq 4 ] || die "usage: build.sh BINARY VERSION TARGET OUTDIR"
BINARY="$1" VERSION="$2" TARGET="$3" OUTDIR="$4"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

read -r -a MCPB_CMD <<<"${MCPB:-mcpb}"
[ "${#MCPB_CMD[@]}" -gt 0 ] || die "MCPB is empty"
NODE="${NODE:-node}"

[ -f "$BINARY" ] || die "no binary at $BINARY"
[[ "$VERSION" =~ ^[0-9]+\.[0-9]+\.[0-9]+([-+][0-9A-Za-z.+-]+)?$ ]] || die "VERSION is not a semantic version: $VERSION"
case "$TARGET" in
  *-linux-*) PLATFORM=linux EXE=continuity ;;
  *-apple-darwin) PLATFORM=darwin EXE=continuity ;;
  *-windows-*) PLATFORM=win32 EXE=continuity.exe ;;
  *) die "unsupported target $TARGET (expected *-linux-*, *-apple-darwin or *-windows-*)" ;;
esac

STAGE="$(mktemp -d "${TMPDIR:-/tmp}/continuity-mcpb.XXXXXX")"
trap 'rm -rf "$STAGE"' EXIT

mkdir -p "$STAGE/server" "$OUTDIR"
install -m 0755 "$BINARY" "$STAGE/server/$EXE"

# shellcheck disable=SC2016 # ${__dirname} is literal: the MCPB host substitutes it
VERSION="$VERSION" PLATFORM="$PLATFORM" EXE="$EXE" "$NODE" -e '
  const fs = require("fs");
  const [src, dst] = process.argv.slice(1);
  const m = JSON.parse(fs.readFileSync(src, "utf8"));
  m.version = process.env.VERSION;
  m.compatibility = { ...(m.compatibility || {}), platforms: [process.env.PLATFORM] };
  m.server.entry_point = "server/" + process.env.EXE;
  m.server.mcp_config.command = "${__dirname}/server/" + process.env.EXE;
  fs.writeFileSync(dst, JSON.stringify(m, null, 2) + "\n");
' "$HERE/manifest.json" "$STAGE/manifest.json"

OUT="$(cd "$OUTDIR" && pwd)/continuity-$VERSION-$TARGET.mcpb"
rm -f "$OUT"
"${MCPB_CMD[@]}" validate "$STAGE/manifest.json" || die "mcpb validate failed on the staged manifest"
"${MCPB_CMD[@]}" pack "$STAGE" "$OUT" || die "mcpb pack failed"
[ -s "$OUT" ] || die "mcpb pack wrote no $OUT"
printf '%s\n' "$OUT"
