#!/usr/bin/env bash
# Make a docker base image from a debootstrapped root (called by scripts/setup-machine.sh).
#
#   make-base-image.sh IMAGE SUITE MIRROR
#
# debootstrap sometimes leaves /proc (and /sys, /dev/pts) mounted, and busy, inside the
# root: a plain `tar -c` of the root then reads the live /proc and fails. So everything
# mounted under the root is unmounted first (deepest first, lazily when busy), tar stays on
# the root's file system, and a trap unmounts and removes the root after success or failure.
# FDL_DEBOOTSTRAP names the debootstrap command (the tests put a faulty one there); the root
# goes under TMPDIR (default /tmp).
set -euo pipefail

if [ "$#" -ne 3 ]; then
  printf 'usage: %s IMAGE SUITE MIRROR\n' "$0" >&2
  exit 2
fi
image="$1" suite="$2" mirror="$3"
debootstrap="${FDL_DEBOOTSTRAP:-debootstrap}"

log() { printf '[setup] %s\n' "$*" >&2; }

# Mount points at or under $1, deepest first (mountinfo's field 5, octal escapes decoded).
mounts_under() {
  local top="$1" point
  while read -r _ _ _ _ point _; do
    point="$(printf '%b' "$point")"
    case "$point" in "$top" | "$top"/*) printf '%s\n' "$point" ;; esac
  done </proc/self/mountinfo | awk '{ print length($0) "\t" $0 }' | sort -rn | cut -f2-
}

# Unmount everything at or under $1; a busy mount is detached lazily (umount -l).
unmount_under() {
  local top="$1" point left
  for _ in 1 2 3 4 5; do  # stacked mounts need a pass each
    left="$(mounts_under "$top")"
    [ -n "$left" ] || return 0
    while IFS= read -r point; do
      umount "$point" 2>/dev/null || umount -l "$point" 2>/dev/null || true
    done <<<"$left"
  done
  left="$(mounts_under "$top")"
  [ -z "$left" ] || { log "error: still mounted under $top: $(paste -sd' ' <<<"$left")"; return 1; }
}

root="$(realpath "$(mktemp -d "${TMPDIR:-/tmp}/fdl-rootfs.XXXXXX")")"
debootstrap_log="$(mktemp "${TMPDIR:-/tmp}/fdl-debootstrap.XXXXXX.log")"
cleanup() {
  local status=$?
  trap - EXIT INT TERM HUP
  if unmount_under "$root"; then
    # --one-file-system: should anything stay mounted, rm never reaches into it
    rm -rf --one-file-system "$root"
  else
    log "error: $root is left in place: unmount what is listed above, then rm -rf $root"
    [ "$status" -ne 0 ] || status=1
  fi
  rm -f "$debootstrap_log"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

log "debootstrapping $suite into $root (about 30 s)"
if ! $debootstrap --variant=minbase "$suite" "$root" "$mirror" >"$debootstrap_log" 2>&1; then
  tail -20 "$debootstrap_log" >&2
  log "error: debootstrap failed (its log is above)"
  exit 1
fi
unmount_under "$root"
# Leave apt lists out of the image, as a registry image would.
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin
tar -C "$root" --one-file-system --numeric-owner -c . \
  | docker import -c 'CMD ["/bin/bash"]' - "$image" >/dev/null
log "imported $image"
