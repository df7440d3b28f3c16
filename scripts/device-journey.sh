#!/usr/bin/env bash
# The C++ journey on a GPU machine (run by hand through the device tool; not part of CI):
# `fdl init --template cpp` where init detects the GPUs (no CPU pin), setup's plan, which
# copies the machine's pip torch with its NVIDIA libraries (offline: no download),
# verify, build, train on the GPU, test, diagnose. No network is assumed. Writes to $OUT.
set -uo pipefail
repo=$PWD
export PYTHONPATH=$repo FDL_HOME=/tmp/fdl-home FDL_CACHE_DIR=/tmp/fdl-cache NO_COLOR=1 PYTHONUNBUFFERED=1
out=${OUT:-/tmp/out}; mkdir -p "$out"
py=$(command -v python3)
fdl() { "$py" -m fdl "$@"; }
step() { echo; echo "== $* ($(date +%T))"; }
work=$(mktemp -d /tmp/journey.XXXX); cd "$work" || exit 1
torch=$("$py" -c "import torch; print(torch.__version__.split('+')[0])")
step "fdl init demo --template cpp --native --torch $torch --yes"
fdl init demo --template cpp --native --torch "$torch" --yes 2>&1 | tail -4
cd demo || exit 1
sed -n '/^# The libtorch/,/^commands:/p' fdl.yml
step "fdl setup --dry-run"
timeout 120 "$py" -m fdl setup --dry-run 2>&1 | head -25
step "fdl setup --yes (the planned build is installed for $py: copied, nothing downloaded)"
start=$(date +%s)
timeout 300 "$py" -m fdl setup --yes 2>&1 | tail -12
echo "took $(( $(date +%s) - start )) s; $(du -sh libtorch 2>/dev/null | cut -f1) under libtorch/"
step "fdl libtorch verify"
timeout 300 "$py" -m fdl libtorch verify 2>&1 | tail -14
step "fdl build"
start=$(date +%s)
timeout 600 "$py" -m fdl build > "$out/build.log" 2>&1; echo "exit $?, $(( $(date +%s) - start )) s"
tail -12 "$out/build.log"
step "fdl train -- --steps 300 --log-every 100"
timeout 180 "$py" -m fdl train -- --steps 300 --log-every 100 2>&1 | tail -8
step "fdl train -- --steps 300 --device cpu (the same model on the CPU)"
timeout 180 "$py" -m fdl train -- --steps 300 --log-every 300 --device cpu 2>&1 | tail -4
step "fdl test"
timeout 300 "$py" -m fdl test 2>&1 | tail -4
step "fdl diagnose"
"$py" -m fdl diagnose 2>&1 | sed -n '/^gpus/,$p' | head -30
