#!/bin/sh
# fdl libtorch build: checks the builder image before any work (seconds, not hours).
#   FDL_EXPECT_CUDA  the CUDA version the plan chose (nvcc must be that one)
#   FDL_MAX_GCC      the newest gcc major that CUDA accepts
#   FDL_MAX_CUDNN    the newest cuDNN (major.minor) that runs on the oldest arch
#   FDL_OLDEST_ARCH  that arch, for the message
set -eu
fail() { echo "fdl-preflight: $*" >&2; exit 1; }

for tool in cmake python3 g++; do
  command -v "$tool" >/dev/null 2>&1 || fail "the image has no $tool"
done

if [ -n "${FDL_EXPECT_CUDA:-}" ]; then
  NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
  [ -x "$NVCC" ] || fail "the image has no nvcc (the plan needs CUDA $FDL_EXPECT_CUDA): use a -devel base image"
  found=$("$NVCC" --version | sed -n 's/.*release \([0-9][0-9]*\.[0-9][0-9]*\).*/\1/p')
  [ "$found" = "$FDL_EXPECT_CUDA" ] || fail "the image has CUDA $found, the plan needs CUDA $FDL_EXPECT_CUDA"
fi

if [ -n "${FDL_MAX_GCC:-}" ]; then
  gcc_major=$(g++ -dumpversion | cut -d. -f1)
  [ "$gcc_major" -le "$FDL_MAX_GCC" ] || fail "g++ $gcc_major is newer than CUDA ${FDL_EXPECT_CUDA:-} accepts (<= $FDL_MAX_GCC)"
fi

if [ -n "${FDL_MAX_CUDNN:-}" ]; then
  header=""
  for candidate in /usr/include/cudnn_version.h /usr/include/x86_64-linux-gnu/cudnn_version_v9.h \
                   /usr/local/cuda/include/cudnn_version.h; do
    if [ -f "$candidate" ]; then header=$candidate; break; fi
  done
  if [ -n "$header" ]; then
    major=$(sed -n 's/^#define CUDNN_MAJOR[ \t]*\([0-9]*\).*/\1/p' "$header")
    minor=$(sed -n 's/^#define CUDNN_MINOR[ \t]*\([0-9]*\).*/\1/p' "$header")
    max_major=${FDL_MAX_CUDNN%%.*}
    max_minor=${FDL_MAX_CUDNN#*.}
    if [ "$major" -gt "$max_major" ] || { [ "$major" -eq "$max_major" ] && [ "$minor" -gt "$max_minor" ]; }; then
      fail "cuDNN $major.$minor in the image is too new for ${FDL_OLDEST_ARCH:-the oldest arch} (needs <= $FDL_MAX_CUDNN): set switches USE_CUDNN: 0, or pass --base-image with an older cuDNN"
    fi
  fi
fi
echo "fdl-preflight: ok"
