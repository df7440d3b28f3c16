#!/usr/bin/env bash
# floDl's own CLI, the reference fdl is measured against (tests/integration/test_reference_parity.py,
# bench/cli_latency.py): `cargo install flodl-cli --version 0.5.3 --locked` into the tests' cache;
# 0.8.0 beside it for its run-time contract (tests/integration/test_reference_contract.py).
#
#   bash scripts/setup-reference-cli.sh                             # 0.5.3; prints the binary's path
#   FDL_REFERENCE_VERSION=0.8.0 bash scripts/setup-reference-cli.sh # 0.8.0 (Rust 1.91 or newer)
#
# Where: $FDL_TEST_CACHE (default ${XDG_CACHE_HOME:-$HOME/.cache}/fdl-tests)/tools/flodl-cli-0.5.3/bin/fdl,
# with cargo's registry (cargo-home/) and target directory (cargo-target/flodl-cli-0.5.3/) in the
# same cache, so that a second install downloads and compiles nothing. The binary is also named
# `fdl`: call it by its path, never put its directory on PATH. Exit 4 when no cargo is found,
# 1 when the install fails (cargo's output says why), 0 when the binary answers its version.
set -euo pipefail

VERSION="${FDL_REFERENCE_VERSION:-0.5.3}"
case "$VERSION" in
  0.5.*) RUST_MIN=1.85 ;;
  *) RUST_MIN=1.91 ;;  # flodl-cli 0.8.0's rust-version
esac
CACHE="${FDL_TEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/fdl-tests}"
TOOLS="$CACHE/tools/flodl-cli-$VERSION"
BINARY="$TOOLS/bin/fdl"

answers() { [ -x "$BINARY" ] && [ "$(FDL_NO_UPDATE_CHECK=1 "$BINARY" --version 2>/dev/null)" = "flodl-cli $VERSION" ]; }

if answers; then
  echo "$BINARY"
  exit 0
fi

CARGO="$(command -v cargo || true)"
if [ -z "$CARGO" ] && [ -x "$HOME/.cargo/bin/cargo" ]; then
  CARGO="$HOME/.cargo/bin/cargo"
fi
if [ -z "$CARGO" ]; then
  echo "error: cargo not found (on PATH or in ~/.cargo/bin): the reference CLI flodl-cli $VERSION is built from crates.io" >&2
  echo "  fix: install Rust $RUST_MIN or newer (rustup from https://rustup.rs; Debian 12's 1.63 is too old), then run FDL_REFERENCE_VERSION=$VERSION bash scripts/setup-reference-cli.sh" >&2
  exit 4
fi

mkdir -p "$CACHE/tools"
# cargo installs into a folder of its own, renamed into place when whole
PARTIAL="$(mktemp -d "$CACHE/tools/.flodl-cli-$VERSION.partial.XXXXXX")"
trap 'rm -rf "$PARTIAL"' EXIT
echo "installing flodl-cli $VERSION (cargo install, a few minutes on 2 cores) into $TOOLS" >&2
if ! CARGO_HOME="${FDL_REFERENCE_CARGO_HOME:-$CACHE/cargo-home}" \
     CARGO_TARGET_DIR="$CACHE/cargo-target/flodl-cli-$VERSION" \
     "$CARGO" install flodl-cli --version "$VERSION" --locked --root "$PARTIAL" --quiet >&2; then
  echo "error: cargo install flodl-cli --version $VERSION failed (its output above)" >&2
  echo "  fix: check that crates.io answers (cargo search flodl-cli) and that rustc is $RUST_MIN or newer (rustc --version), then run FDL_REFERENCE_VERSION=$VERSION bash scripts/setup-reference-cli.sh again" >&2
  exit 1
fi
rm -rf "$TOOLS"
chmod 755 "$PARTIAL"
mv "$PARTIAL" "$TOOLS"
trap - EXIT
answers || { echo "error: $BINARY does not answer 'flodl-cli $VERSION' to --version" >&2; exit 1; }
echo "$BINARY"
