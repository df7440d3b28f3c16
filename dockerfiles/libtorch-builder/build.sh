#!/bin/sh
# fdl libtorch build: runs inside the builder image, in one RUN step with cache mounts:
#   /opt/pytorch       the source checkout (cache mount; or a copy of --source from the context)
#   /opt/work          the CMake build tree (cache mount: an interrupted build resumes here)
#   /opt/compiler-cache ccache/sccache storage (cache mount shared by every build)
# The plan's environment is already set (ENV lines). The result is the set of files CMake
# installed (build/install_manifest.txt), copied to /opt/libtorch in the image.
set -eu
SRC=${FDL_SRC:-/opt/pytorch/src}
WORK=/opt/work
OUT=/opt/libtorch
CONTEXT_SRC=/opt/context-src

if [ -d "$CONTEXT_SRC" ]; then
  # cp -a keeps modification times: unchanged sources do not recompile on a re-run.
  mkdir -p "$SRC"
  cp -a "$CONTEXT_SRC/." "$SRC/"
else
  # A checkout counts only when it is the tag's commit: a clone that died half-way lives in
  # $SRC.partial (never renamed) and is started again; submodules an interrupted fetch left
  # out are fetched again (git resumes them). Verified again before building.
  head=$(git -C "$SRC" rev-parse HEAD 2>/dev/null || true)
  want=$(git -C "$SRC" rev-parse "refs/tags/$FDL_TAG^{commit}" 2>/dev/null || true)
  if { [ -z "$head" ] || [ "$head" != "$want" ]; } && [ -n "${FDL_OFFLINE:-}" ]; then
    echo "fdl: $SRC is not a complete checkout of $FDL_TAG, and this step has no network" \
      "(--offline): the fetch phase's cache is gone; run the build again with --fresh" >&2
    exit 1
  fi
  if [ -z "$head" ] || [ "$head" != "$want" ]; then
    [ -e "$SRC" ] && echo "fdl: $SRC is not a complete checkout of $FDL_TAG: cloning again"
    echo "Cloning into $SRC"
    rm -rf "$SRC" "$SRC.partial"
    # shellcheck disable=SC2086
    $FDL_CLONE
    mv "$SRC.partial" "$SRC"
  fi
  if git -C "$SRC" submodule status --recursive | grep -q '^[-+U]'; then
    echo "fdl: fetching the submodules an interrupted clone left out"
    git -C "$SRC" submodule update --init --recursive --depth 1 --jobs 4
  fi
  if git -C "$SRC" submodule status --recursive | grep -q '^[-+U]'; then
    echo "fdl: the submodules of $SRC are incomplete after fetching them again" >&2
    exit 1
  fi
fi

# What the build would otherwise clone while it compiles (tools/build_pytorch_libs.py runs
# checkout_nccl; newer trees checkout_eigen too): tools/optional_submodules.py clones each
# one that is missing, so here, in the fetch phase, and not an hour into the compile.
if [ -f "$SRC/tools/optional_submodules.py" ]; then
  echo "fdl: fetching the optional dependencies (tools/optional_submodules.py)"
  (cd "$SRC" && python3 tools/optional_submodules.py)
elif [ "${USE_CUDA:-1}" != "0" ] && [ "${USE_NCCL:-1}" != "0" ] && [ "${USE_SYSTEM_NCCL:-0}" = "0" ] \
     && [ ! -e "$SRC/third_party/nccl" ]; then
  # Trees without that script clone NCCL in tools/build_pytorch_libs.py (checkout_nccl),
  # at the tag pinned in .ci/docker/ci_commit_pins: do the same clone here.
  pins="$SRC/.ci/docker/ci_commit_pins"
  major=$(nvcc --version 2>/dev/null | sed -n 's/.*release \([0-9][0-9]*\)\..*/\1/p')
  for name in "nccl-cu${major:-12}.txt" nccl.txt nccl-cu12.txt; do
    if [ -f "$pins/$name" ]; then
      tag=$(tr -d '[:space:]' < "$pins/$name")
      echo "fdl: fetching NCCL $tag (the build would clone it while compiling)"
      git clone --depth 1 --branch "$tag" "${FDL_NCCL_REPO:-https://github.com/NVIDIA/nccl}" "$SRC/third_party/nccl"
      break
    fi
  done
fi

if [ -n "${FDL_FETCH_ONLY:-}" ]; then
  echo "fdl: source ready in $SRC"
  exit 0
fi

if [ -n "${FDL_FRESH:-}" ]; then
  echo "fdl: starting from an empty build tree (--fresh)"
  rm -rf "$WORK/build"
fi

if [ -f /run/secrets/cache_env ]; then
  set -a
  # shellcheck disable=SC1091
  . /run/secrets/cache_env
  set +a
fi

PY=python3
if [ -x /opt/fdl-venv/bin/python ]; then
  PY=/opt/fdl-venv/bin/python
  PATH=/opt/fdl-venv/bin:$PATH
  export PATH
fi

LAUNCHER=${CMAKE_CXX_COMPILER_LAUNCHER:-}
case "$LAUNCHER" in
  *sccache) "$LAUNCHER" --start-server >/dev/null 2>&1 || {
      echo "fdl: warning: sccache cannot reach its cache; building without it" >&2
      unset CMAKE_C_COMPILER_LAUNCHER CMAKE_CXX_COMPILER_LAUNCHER CMAKE_CUDA_COMPILER_LAUNCHER
      LAUNCHER=""; }
    [ -z "$LAUNCHER" ] || "$LAUNCHER" --zero-stats >/dev/null 2>&1 || true ;;
  *ccache) "$LAUNCHER" --zero-stats >/dev/null 2>&1 || true ;;
esac

mkdir -p "$WORK"
cd "$WORK"
started=$(date +%s)
"$PY" "$SRC/tools/build_libtorch.py"
finished=$(date +%s)

rm -rf "$OUT"
mkdir -p "$OUT"
if [ -f build/install_manifest.txt ]; then
  sed -e "s|^$SRC/torch/||" -e 's|^\./||' build/install_manifest.txt > /tmp/fdl-installed.txt
  (cd "$SRC/torch" && tar -cf - -T /tmp/fdl-installed.txt) | (cd "$OUT" && tar -xf -)
else
  for part in lib include share; do
    [ -d "$SRC/torch/$part" ] && cp -a "$SRC/torch/$part" "$OUT/"
  done
fi

NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
{
  echo "torch_version=$(cat "$SRC/version.txt" 2>/dev/null || true)"
  echo "git_hash=$(git -C "$SRC" rev-parse HEAD 2>/dev/null || cat "$SRC/torch/build-hash" 2>/dev/null || true)"
  echo "nvcc=$([ -x "$NVCC" ] && "$NVCC" --version | sed -n 's/.*release [0-9.]*, V\([0-9.]*\).*/\1/p' || true)"
  echo "gcc=$(g++ -dumpfullversion 2>/dev/null || true)"
  echo "cmake=$(cmake --version | sed -n 's/^cmake version //p')"
  echo "python=$("$PY" -c 'import platform; print(platform.python_version())')"
  echo "duration_s=$((finished - started))"
} > "$OUT/.fdl-build-facts"

case "$LAUNCHER" in
  *sccache) echo "fdl-cache-stats-begin sccache"; "$LAUNCHER" --show-stats --stats-format json || true
            echo "fdl-cache-stats-end"; "$LAUNCHER" --stop-server >/dev/null 2>&1 || true ;;
  *ccache) echo "fdl-cache-stats-begin ccache"; "$LAUNCHER" --print-stats || true
           echo "fdl-cache-stats-end" ;;
esac
echo "fdl: libtorch collected in $OUT"
