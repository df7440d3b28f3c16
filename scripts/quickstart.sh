#!/usr/bin/env bash
# fdl's main job on an embedded default, on a fresh machine.
#
# Sets up a Python environment with fdl, then shows the explainable manifest
# on the example project shipped in tests/fixtures/manifest-project: the
# merged configuration with the file:line of every value, and where one
# value came from across base, inherited file, overlays, an environment
# variable and a --set option.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${FDL_VENV:-.venv}"
if [ ! -x "$VENV/bin/fdl" ]; then
  python3 -m venv "$VENV"
  "$VENV/bin/python" -m pip install --quiet -e . 2>&1 | grep -v "^WARNING: Location" || true
fi
FDL="$PWD/$VENV/bin/fdl"
cd tests/fixtures/manifest-project
step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }
step fdl --help
"$FDL" --help
step fdl --env gpu config show
"$FDL" --env gpu config show
step FDL__COMMANDS__LINT__RUN=... fdl --env gpu --set commands.fmt.run=... config explain commands
FDL__COMMANDS__LINT__RUN="cargo clippy --all-targets" "$FDL" --env gpu --set commands.fmt.run="cargo fmt" config explain commands
step fdl --env gpu config layers
"$FDL" --env gpu config layers
