#!/usr/bin/env bash
# Prepare a fresh Debian 12 machine for fdl's tests and quick start:
# system packages, a running docker engine, and a locally made base image
# (no registry is reachable, so images start from a debootstrapped Debian).
#
# Idempotent. With FDL_REQUIRE_DOCKER=1 a missing docker engine is an error; with
# FDL_REQUIRE_ALL=1 (.ci/run) anything missing is (SLURM, the registry, the tools);
# otherwise it is a warning and the tests that need it skip.
set -euo pipefail

BASE_IMAGE="${FDL_TEST_BASE_IMAGE:-fdl-test/debian:bookworm}"
SUITE="${FDL_TEST_SUITE:-bookworm}"
MIRROR="${FDL_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
# bubblewrap: the sandbox of the sccache-dist build server (tests/integration/test_build_sccache_dist.py)
# hipcc: HIP code objects for the offload-bundle reader's tests (tests/integration/test_offload_hipcc.py)
# busybox-static: the tiny root of the faulty debootstrap in tests/integration/test_base_image.py
PACKAGES=(docker.io docker-compose debootstrap busybox-static redis-server ccache bubblewrap cmake g++ make git unzip curl zsh fish hipcc)

log() { printf '[setup] %s\n' "$*" >&2; }
need_all() { [ "${FDL_REQUIRE_ALL:-0}" = "1" ]; }
need_docker() { [ "${FDL_REQUIRE_DOCKER:-0}" = "1" ] || need_all; }
must_have() {  # a warning, or with FDL_REQUIRE_ALL=1 an error
  if need_all; then log "error: $* (FDL_REQUIRE_ALL=1)"; exit 1; fi
  log "warning: $*"
}
fail_or_warn() {
  if need_docker; then log "error: $*"; exit 1; fi
  log "warning: $* (docker tests will be skipped)"
  exit 0
}

missing=()
for pkg in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ "${#missing[@]}" -gt 0 ]; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null; then
    log "installing ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    must_have "missing packages ${missing[*]} (run as root to install them)"
  fi
fi

# The YAML language server (npm) for the editor test: fdl init's schema and tags as
# VS Code and Neovim use them (idempotent; FDL_TEST_TOOLS overrides the place).
TOOLS="${FDL_TEST_TOOLS:-/opt/fdl-test-tools}"
if command -v npm >/dev/null && [ ! -x "$TOOLS/node_modules/.bin/yaml-language-server" ]; then
  log "installing yaml-language-server into $TOOLS"
  mkdir -p "$TOOLS"
  (cd "$TOOLS" && npm install --silent --no-audit --no-fund yaml-language-server@1 >/dev/null 2>&1) \
    || must_have "yaml-language-server could not be installed (its test skips)"
fi

# cuobjdump (NVIDIA's nvidia-cuda-cuobjdump wheel, no toolkit install) for the tests that
# check fdl's fatbin reader against it (idempotent; they skip without it).
if [ ! -x "$TOOLS/cuda/bin/cuobjdump" ] && command -v python3 >/dev/null; then
  log "installing cuobjdump into $TOOLS/cuda/bin"
  scratch="$(mktemp -d /tmp/fdl-cuobjdump.XXXXXX)"
  if python3 -m pip download --quiet --no-deps "nvidia-cuda-cuobjdump==13.5.*" --dest "$scratch" >/dev/null 2>&1 \
    && mkdir -p "$TOOLS/cuda/bin" \
    && unzip -o -q -j "$scratch"/nvidia_cuda_cuobjdump-*.whl '*/bin/cuobjdump' -d "$TOOLS/cuda/bin"; then
    chmod 755 "$TOOLS/cuda/bin/cuobjdump"
  else
    must_have "cuobjdump could not be installed (the fatbin-vs-cuobjdump tests skip)"
  fi
  rm -rf "$scratch"
fi

# The linters of the project's GitHub workflows (tests/integration/test_workflows.py; they
# skip without them, fail in CI): actionlint, built by `go install` through the Go module
# proxy, and check-jsonschema (GitHub's workflow schema is vendored in it) in a venv of its
# own. Idempotent.
if [ ! -x "$TOOLS/bin/actionlint" ]; then
  go_bin="$(command -v go || echo /usr/local/go/bin/go)"
  if [ -x "$go_bin" ]; then
    log "installing actionlint into $TOOLS/bin"
    mkdir -p "$TOOLS/bin"
    GOBIN="$TOOLS/bin" "$go_bin" install github.com/rhysd/actionlint/cmd/actionlint@v1.7.12 >/dev/null 2>&1 \
      || must_have "actionlint could not be built (the workflow tests skip)"
  else
    must_have "no go to build actionlint with (the workflow tests skip)"
  fi
fi
if [ ! -x "$TOOLS/check-jsonschema/bin/check-jsonschema" ] && command -v python3 >/dev/null; then
  log "installing check-jsonschema into $TOOLS/check-jsonschema"
  { python3 -m venv "$TOOLS/check-jsonschema" \
    && "$TOOLS/check-jsonschema/bin/pip" install --quiet "check-jsonschema==0.39.0"; } >/dev/null 2>&1 \
    || must_have "check-jsonschema could not be installed (the workflow tests skip)"
fi

# CUDA 13.0's nvcc from NVIDIA's wheels (no toolkit installer): nvcc, cicc (nvvm), the
# crt and runtime headers with libcudart, and CCCL (cuda_fp16.h includes <nv/target>),
# laid out as a toolkit in $CUDA_ROOT, /usr/local/cuda -> it, and /usr/local/bin/nvcc a
# wrapper that execs it (nvcc finds its toolkit from the path it was called by, so a
# symlink would not do). The tests that compile device code need it (tests/support/
# artefacts.py: they fail in CI without it). The wheels are kept in the tests' cache;
# the toolkit is unpacked beside $CUDA_ROOT and renamed into place once nvcc compiled a
# kernel, so an interrupted run leaves nothing a later run takes as done.
CUDA_SERIES="13.0"
CUDA_ROOT="${FDL_TEST_CUDA_ROOT:-/usr/local/cuda-$CUDA_SERIES}"
TEST_CACHE="${FDL_TEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/fdl-tests}"
CUDA_WHEELS=(nvidia-cuda-nvcc nvidia-nvvm nvidia-cuda-crt nvidia-cuda-runtime nvidia-cuda-cccl)
need_artefacts() { need_docker || [ "${FDL_REQUIRE_ARTEFACTS:-0}" = "1" ]; }
cuda_problem() {
  if need_artefacts; then log "error: $*"; exit 1; fi
  log "warning: $* (the tests that need nvcc skip)"
}
cuda_wheel() {  # the cached wheel of package $1 for CUDA_SERIES, downloaded when missing
  local package="$1" file="${1//-/_}" found partial
  found="$(ls -v "$TEST_CACHE/wheels/$file-$CUDA_SERIES".*-py3-none-*x86_64.whl 2>/dev/null | tail -1 || true)"
  if [ -z "$found" ]; then
    log "downloading $package==$CUDA_SERIES.* into $TEST_CACHE/wheels"
    mkdir -p "$TEST_CACHE/wheels"
    partial="$(mktemp -d "$TEST_CACHE/wheels/.partial.XXXXXX")"
    if ! python3 -m pip download --quiet --no-cache-dir --no-deps --only-binary=:all: --dest "$partial" \
      "$package==$CUDA_SERIES.*" >&2; then
      rm -rf "$partial"
      return 1
    fi
    mv "$partial"/*.whl "$TEST_CACHE/wheels/"  # a complete wheel (pip checked its hash)
    rm -rf "$partial"
    found="$(ls -v "$TEST_CACHE/wheels/$file-$CUDA_SERIES".*-py3-none-*x86_64.whl | tail -1)"
  fi
  printf '%s\n' "$found"
}
install_cuda() {
  local wheels=() wheel package stage
  # what an interrupted run left (never taken as complete: only renamed into place when done)
  rm -rf "$(dirname "$CUDA_ROOT")/.$(basename "$CUDA_ROOT").partial."* "$TEST_CACHE/wheels/.partial."*
  for package in "${CUDA_WHEELS[@]}"; do
    if ! wheel="$(cuda_wheel "$package")"; then
      cuda_problem "could not download $package==$CUDA_SERIES.* (retry: bash scripts/setup-machine.sh)"
      return 0
    fi
    wheels+=("$wheel")
  done
  stage="$(mktemp -d "$(dirname "$CUDA_ROOT")/.$(basename "$CUDA_ROOT").partial.XXXXXX")"
  for wheel in "${wheels[@]}"; do
    if ! unzip -q -o "$wheel" 'nvidia/cu13/*' -d "$stage/wheels"; then
      rm -rf "$stage"
      cuda_problem "$wheel does not unpack (delete it, then retry: bash scripts/setup-machine.sh)"
      return 0
    fi
  done
  # the toolkit's layout: bin/, nvvm/{bin,libdevice,lib64}/, targets/x86_64-linux/{include,lib}/
  local from="$stage/wheels/nvidia/cu13" root="$stage/root"
  local target="$root/targets/x86_64-linux"
  mkdir -p "$root/nvvm/lib64" "$target"
  mv "$from/bin" "$root/bin"
  mv "$from/nvvm/bin" "$from/nvvm/libdevice" "$root/nvvm/"
  mv "$from/lib/libnvvm.so."* "$root/nvvm/lib64/"
  mv "$from/include" "$from/lib" "$target/"
  (cd "$root/nvvm/lib64" && ln -s libnvvm.so.* libnvvm.so)
  ln -s libcudart.so.13 "$target/lib/libcudart.so"
  ln -s targets/x86_64-linux/include "$root/include"
  ln -s targets/x86_64-linux/lib "$root/lib64"
  chmod 755 "$root/bin/"* "$root/nvvm/bin/"*
  chmod 644 "$root/bin/nvcc.profile"
  # nvcc must compile a kernel with host code before the toolkit counts as installed
  printf '%s\n' '#include <cstdio>' '#include <cuda_fp16.h>' \
    '__global__ void scale(float* x) { x[threadIdx.x] *= 2.0f; }' \
    'int main() { scale<<<1, 32>>>(nullptr); std::printf("%d\n", (int)cudaGetLastError()); }' \
    >"$stage/k.cu"
  if ! "$root/bin/nvcc" -gencode arch=compute_75,code=sm_75 -gencode arch=compute_120,code=compute_120 \
    "$stage/k.cu" -o "$stage/k" >"$stage/nvcc.log" 2>&1; then
    cat "$stage/nvcc.log" >&2
    rm -rf "$stage"
    cuda_problem "the nvcc unpacked from ${wheels[*]##*/} does not compile a kernel"
    return 0
  fi
  printf '%s\n' "${wheels[@]##*/}" >"$root/fdl-wheels.txt"
  mv "$root" "$CUDA_ROOT"
  rm -rf "$stage"
  log "installed $("$CUDA_ROOT/bin/nvcc" --version | tail -2 | head -1) in $CUDA_ROOT"
}
if [ -f "$CUDA_ROOT/fdl-wheels.txt" ]; then  # written last: an earlier run installed it
  log "CUDA $CUDA_SERIES's nvcc: $CUDA_ROOT (from $(paste -sd' ' "$CUDA_ROOT/fdl-wheels.txt" | sed 's/-py3-none-[^ ]*\.whl//g'))"
elif [ -e "$CUDA_ROOT" ]; then
  log "$CUDA_ROOT was not installed by this script: kept as it is"
elif [ ! -w "$(dirname "$CUDA_ROOT")" ]; then
  cuda_problem "cannot write $(dirname "$CUDA_ROOT") for CUDA $CUDA_SERIES's nvcc (run as root)"
else
  log "installing CUDA $CUDA_SERIES's nvcc into $CUDA_ROOT from ${CUDA_WHEELS[*]}"
  install_cuda
fi
if [ -f "$CUDA_ROOT/fdl-wheels.txt" ] && [ "$CUDA_ROOT" = "/usr/local/cuda-$CUDA_SERIES" ] \
  && [ -w /usr/local ] && [ -w /usr/local/bin ]; then
  if [ ! -e /usr/local/cuda ] || [ -L /usr/local/cuda ]; then
    [ "$(readlink /usr/local/cuda || true)" = "cuda-$CUDA_SERIES" ] || ln -sfn "cuda-$CUDA_SERIES" /usr/local/cuda
  fi
  wrapper="/usr/local/bin/nvcc"
  if [ ! -e "$wrapper" ] || grep -q "fdl-wheels.txt" "$wrapper"; then
    printf '#!/bin/sh\n# scripts/setup-machine.sh: CUDA %s from NVIDIA wheels (%s/fdl-wheels.txt)\nexec %s/bin/nvcc "$@"\n' \
      "$CUDA_SERIES" "$CUDA_ROOT" "$CUDA_ROOT" >"$wrapper.partial"
    chmod 755 "$wrapper.partial"
    mv "$wrapper.partial" "$wrapper"
  fi
  command -v nvcc >/dev/null || log "warning: /usr/local/bin is not on PATH: nvcc is $CUDA_ROOT/bin/nvcc"
fi

# A one-node SLURM cluster on 127.0.0.1 for `fdl deploy` tests (idempotent).
"$(dirname "$0")/setup-slurm.sh" || must_have "the local SLURM cluster did not start (its tests skip)"

# The docker engine: start dockerd when nothing answers.
if ! docker info >/dev/null 2>&1; then
  if [ "$(id -u)" = "0" ] && command -v dockerd >/dev/null; then
    log "starting dockerd"
    (dockerd >/var/log/fdl-dockerd.log 2>&1 &)
    for _ in $(seq 1 60); do
      docker info >/dev/null 2>&1 && break
      sleep 0.5
    done
  fi
fi
docker info >/dev/null 2>&1 || fail_or_warn "no docker engine answers"

# A local base image: debootstrap a minimal Debian and import it (nothing stays mounted
# or behind in /tmp, whatever debootstrap leaves: scripts/make-base-image.sh).
if ! docker image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
  command -v debootstrap >/dev/null || fail_or_warn "debootstrap is not installed"
  "$(dirname "$0")/make-base-image.sh" "$BASE_IMAGE" "$SUITE" "$MIRROR" \
    || fail_or_warn "the base image $BASE_IMAGE could not be made (the reason is above)"
fi
# The tests build many images; BuildKit keeps their cache until told otherwise
# (docker 20.10 has no GC by default). Keep the newest part, bounded.
KEEP="${FDL_TEST_KEEP_BUILD_CACHE:-10GB}"
if [ "$KEEP" != "all" ]; then
  docker builder prune -f --keep-storage "$KEEP" >/dev/null 2>&1 \
    || log "warning: could not trim the BuildKit cache"
fi
# A registry on 127.0.0.1 for the push-by-digest tests (idempotent).
"$(dirname "$0")/setup-registry.sh" || must_have "the local registry did not start (its tests skip)"
log "docker engine ready; base image $BASE_IMAGE"
