#!/usr/bin/env bash
# fdl's main job on an embedded default, on a fresh machine:
#
#   1. fdl init      a C++ libtorch project (template cpp, mode native)
#   2. fdl libtorch  a CPU libtorch from PyPI's torch wheel: its CPU view, only what a
#                    CPU program loads (~130 MB read of a 500-900 MB CUDA wheel)
#   3. fdl build     configure and build it natively (CMake, find_package(Torch))
#      fdl test      its test (ctest)
#      fdl train     train it for a few steps, printing the loss
#   4. fdl image     when a docker engine answers: build its slim training image
#                    and train in it
#
# Sets up the machine (scripts/setup-machine.sh) and a virtual environment with
# fdl first, as scripts/test.sh does. Idempotent: run it again and every step
# finds its work done or does only what changed.
#
#   FDL_QUICKSTART_DIR   where the project goes (default: $TMPDIR/fdl-quickstart)
#   FDL_QUICKSTART_TORCH torch version (default 2.13.0)
#   FDL_QUICKSTART_INDEX package index for the wheel (default: $PIP_INDEX_URL, else PyPI),
#                        e.g. https://download.pytorch.org/whl/cpu
#   FDL_QUICKSTART_BASE  base image of the training image (default: debian:bookworm-slim
#                        when the engine has it, else the locally made test base image)
set -euo pipefail
cd "$(dirname "$0")/.."
REPO="$PWD"

VENV="${FDL_VENV:-.venv}"
PYTHON="${PYTHON:-python3}"
WORK="${FDL_QUICKSTART_DIR:-${TMPDIR:-/tmp}/fdl-quickstart}"
TORCH="${FDL_QUICKSTART_TORCH:-2.13.0}"
NAME=my-model
PROJECT="$WORK/$NAME"

bash scripts/setup-machine.sh
if [ ! -x "$VENV/bin/fdl" ]; then
  "$PYTHON" -m venv "$VENV"
  "$VENV/bin/python" -m pip install --quiet --upgrade pip >/dev/null 2>&1 || true
  "$VENV/bin/python" -m pip install --quiet -e . 2>&1 | grep -v "^WARNING: Location" || true
fi
FDL="$REPO/$VENV/bin/fdl"
"$FDL" --version >/dev/null

step() { printf '\n\033[1m$ %s\033[0m\n' "$*" >&2; }
fdl() { step "fdl $*"; "$FDL" "$@"; }
LOG="$(mktemp)"
trap 'rm -f "$LOG"' EXIT

mkdir -p "$WORK"
cd "$WORK"
fdl init "$NAME" --template cpp --mode native --torch "$TORCH" --yes
cd "$PROJECT"

install=(libtorch install --from-wheel --cpu --torch "$TORCH")
[ -n "${FDL_QUICKSTART_INDEX:-}" ] && install+=(--index-url "$FDL_QUICKSTART_INDEX")
fdl "${install[@]}"
fdl build
fdl test
fdl train -- --steps 50 --log-every 10 | tee "$LOG"
native_result="$(grep '^trained' "$LOG" | tail -1)"

image_result="skipped: no docker engine answers"
if docker info >/dev/null 2>&1; then
  base="${FDL_QUICKSTART_BASE:-}"
  if [ -z "$base" ] && ! docker image inspect debian:bookworm-slim >/dev/null 2>&1; then
    base="${FDL_TEST_BASE_IMAGE:-fdl-test/debian:bookworm}"  # made by setup-machine.sh
  fi
  sets=()
  [ -n "$base" ] && sets=(--set "images.train.base=$base")
  fdl "${sets[@]}" image build train | tee "$LOG"
  size_line="$(grep -- '-train:latest:' "$LOG" | tail -1)"
  fdl "${sets[@]}" image run train -- --steps 20 --log-every 5 --out /workspace/runs | tee "$LOG"
  size="${size_line#*: }"
  image_result="$NAME-train:latest, ${size%% =*}: $(grep '^trained' "$LOG" | tail -1) in it; model in $PROJECT/runs/model.pt"
fi

variant="$(cat "$PROJECT/libtorch/.active")"
cat >&2 <<SUMMARY

== fdl quick start: done ==
project   $PROJECT   (fdl init --template cpp --mode native; see its README.md)
libtorch  $PROJECT/libtorch/$variant   (torch $TORCH, CPU: the CPU view of the wheel)
native    $PROJECT/build/train: $native_result
image     $image_result
next      cd $PROJECT && $FDL --help
          remove it all: rm -rf $WORK; docker rmi $NAME-train:latest
SUMMARY
