#!/usr/bin/env bash
# The whole test suite on a fresh machine: system packages, docker engine,
# base image, Python environment, then ruff, mypy, the manual's build, the release's
# build and pytest.
#
#   bash scripts/test.sh              # docker tests skip when no engine answers
#   FDL_REQUIRE_DOCKER=1 bash scripts/test.sh   # they fail instead (CI)
#   bash scripts/test.sh -k manifest  # extra arguments go to pytest
set -euo pipefail
cd "$(dirname "$0")/.."

VENV="${FDL_VENV:-.venv}"
PYTHON="${PYTHON:-python3}"

# The servers the setup starts (SLURM, the registry) stop by themselves once this run,
# which becomes pytest below (exec keeps the PID), has ended.
export FDL_SERVERS_OWNER=$$
bash scripts/setup-machine.sh
# floDl's own CLI (cargo install flodl-cli 0.5.3 and 0.8.0, cached): the reference of the
# parity tests and bench/cli_latency.py; without it they skip here and fail in CI.
for version in 0.5.3 0.8.0; do
  FDL_REFERENCE_VERSION=$version bash scripts/setup-reference-cli.sh >/dev/null || echo "warning: floDl's CLI $version could not be built (above); its parity tests will skip" >&2
done

if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install --quiet --upgrade pip >/dev/null 2>&1 || true
"$VENV/bin/python" -m pip install --quiet -e '.[dev]' 2>&1 | grep -v "^WARNING: Location" || true
"$VENV/bin/python" -c "import fdl, yaml, typer, pytest, hypothesis" 

echo "== ruff" >&2
"$VENV/bin/ruff" check fdl tests bench
"$VENV/bin/ruff" format --check fdl
echo "== mypy" >&2
"$VENV/bin/mypy"
echo "== import contracts (layers, private modules, no cycles)" >&2
"$VENV/bin/lint-imports"
echo "== fdl ci check (the generated CI files match fdl.yml)" >&2
"$VENV/bin/fdl" ci check
echo "== the manual (mkdocs build --strict: broken links, pages left out of the nav)" >&2
"$VENV/bin/python" -m pip install --quiet -r docs/requirements.txt 2>&1 | grep -v "^WARNING: Location" || true
site="$(mktemp -d)"
NO_MKDOCS_2_WARNING=1 "$VENV/bin/mkdocs" build --strict --quiet --site-dir "$site"
rm -rf "$site"
echo "== the release (python -m build, twine check --strict)" >&2
dist="$(mktemp -d)"
"$VENV/bin/python" -m build --outdir "$dist/out" . >"$dist/log" 2>&1 || { cat "$dist/log" >&2; exit 1; }
"$VENV/bin/twine" check --strict "$dist"/out/*
rm -rf "$dist"
# Two workers (pytest-xdist), a test file each at a time, the heaviest files first
# (tests/support/schedule.py): the suite on 2 cores in about half the serial time.
# FDL_TEST_WORKERS=0 runs it serially, in the written order.
workers="${FDL_TEST_WORKERS:-2}"
case "$workers" in
  ''|*[!0-9]*) echo "FDL_TEST_WORKERS must be a whole number (0: serial), not '$workers'" >&2; exit 2 ;;
esac
parallel=()
if [ "$workers" -gt 0 ]; then
  parallel=(-n "$workers" --dist loadfile)
fi
echo "== pytest (${workers} workers)" >&2
exec "$VENV/bin/python" -m pytest "${parallel[@]}" --durations=20 "$@"
