#!/usr/bin/env bash
# Prepare a fresh Debian 12 machine for fdl's tests and quick start:
# system packages, a running docker engine, and a locally made base image
# (no registry is reachable, so images start from a debootstrapped Debian).
#
# Idempotent. With FDL_REQUIRE_DOCKER=1 a missing docker engine is an error;
# otherwise it is a warning and docker tests skip.
set -euo pipefail

BASE_IMAGE="${FDL_TEST_BASE_IMAGE:-fdl-test/debian:bookworm}"
SUITE="${FDL_TEST_SUITE:-bookworm}"
MIRROR="${FDL_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
# bubblewrap: the sandbox of the sccache-dist build server (tests/integration/test_build_sccache_dist.py)
PACKAGES=(docker.io docker-compose debootstrap redis-server ccache bubblewrap cmake g++ make git unzip curl zsh fish)

log() { printf '[setup] %s\n' "$*" >&2; }
need_docker() { [ "${FDL_REQUIRE_DOCKER:-0}" = "1" ]; }
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
    log "warning: missing packages ${missing[*]} (run as root to install them)"
  fi
fi

# The YAML language server (npm) for the editor test: fdl init's schema and tags as
# VS Code and Neovim use them (idempotent; FDL_TEST_TOOLS overrides the place).
TOOLS="${FDL_TEST_TOOLS:-/opt/fdl-test-tools}"
if command -v npm >/dev/null && [ ! -x "$TOOLS/node_modules/.bin/yaml-language-server" ]; then
  log "installing yaml-language-server into $TOOLS"
  mkdir -p "$TOOLS"
  (cd "$TOOLS" && npm install --silent --no-audit --no-fund yaml-language-server@1 >/dev/null 2>&1) \
    || log "warning: yaml-language-server could not be installed (its test skips)"
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
    log "warning: cuobjdump could not be installed (the fatbin-vs-cuobjdump tests skip)"
  fi
  rm -rf "$scratch"
fi

# A one-node SLURM cluster on 127.0.0.1 for `fdl deploy` tests (idempotent).
"$(dirname "$0")/setup-slurm.sh" || log "warning: the local SLURM cluster did not start (its tests skip)"

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

# A local base image: debootstrap a minimal Debian and import it.
if ! docker image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
  command -v debootstrap >/dev/null || fail_or_warn "debootstrap is not installed"
  root="$(mktemp -d /tmp/fdl-rootfs.XXXXXX)"
  log "debootstrapping $SUITE into $root (about 30 s)"
  debootstrap --variant=minbase "$SUITE" "$root" "$MIRROR" >/tmp/fdl-debootstrap.log 2>&1 \
    || { tail -20 /tmp/fdl-debootstrap.log >&2; fail_or_warn "debootstrap failed"; }
  # Leave apt lists out of the image, as a registry image would.
  rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin
  tar -C "$root" -c . | docker import -c 'CMD ["/bin/bash"]' - "$BASE_IMAGE" >/dev/null
  rm -rf "$root"
  log "imported $BASE_IMAGE"
fi
# The tests build many images; BuildKit keeps their cache until told otherwise
# (docker 20.10 has no GC by default). Keep the newest part, bounded.
KEEP="${FDL_TEST_KEEP_BUILD_CACHE:-20GB}"
if [ "$KEEP" != "all" ]; then
  docker builder prune -f --keep-storage "$KEEP" >/dev/null 2>&1 \
    || log "warning: could not trim the BuildKit cache"
fi
# A registry on 127.0.0.1 for the push-by-digest tests (idempotent).
"$(dirname "$0")/setup-registry.sh" || log "warning: the local registry did not start (its tests skip)"
log "docker engine ready; base image $BASE_IMAGE"
