#!/usr/bin/env bash
# A container registry on 127.0.0.1 for fdl's push-by-digest tests: Debian's
# docker-registry (distribution v2), no auth, listening on loopback only.
#
# Idempotent: installs it when missing, starts it when nothing answers. Needs root.
# FDL_TEST_REGISTRY (default 127.0.0.1:5000) picks the port; a port other than 5000 gets
# its own config, storage, PID file, log and watchdog (the tests start one that way).
set -euo pipefail

ADDR="${FDL_TEST_REGISTRY:-127.0.0.1:5000}"
log() { printf '[registry] %s\n' "$*" >&2; }
case "$ADDR" in
  127.0.0.1:[0-9]*) ;;
  *) log "error: FDL_TEST_REGISTRY=$ADDR is not 127.0.0.1:PORT; test servers listen on loopback only"; exit 2 ;;
esac
if [ "$(id -u)" != "0" ]; then log "warning: not root, skipping the local registry"; exit 0; fi
PORT="${ADDR##*:}"
if [ "$PORT" = "5000" ]; then suffix=""; else suffix="-$PORT"; fi
CONF="/etc/fdl/registry$suffix.yml"
ROOT="/var/lib/fdl-registry$suffix"
PIDFILE="/run/fdl-registry$suffix.pid"
LOG="/var/log/fdl-registry$suffix.log"

# Stopped by itself once the test runs that use it have ended (registered first).
# Only the process this script started (its PID file, still docker-registry) is stopped.
# shellcheck disable=SC2016  # expanded by the watchdog when it stops it
"$(dirname "$0")/server-watchdog.sh" "registry$suffix" '
  pid="$(cat '"$PIDFILE"' 2>/dev/null)"
  if [ -n "$pid" ] && grep -q docker-registry "/proc/$pid/cmdline" 2>/dev/null; then kill "$pid"; fi
  rm -f '"$PIDFILE"'
  true'
if curl -sf "http://$ADDR/v2/" >/dev/null 2>&1; then exit 0; fi
if ! command -v docker-registry >/dev/null; then
  log "installing docker-registry"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends docker-registry >/dev/null
fi
mkdir -p /etc/fdl "$ROOT"
cat > "$CONF" <<YAML
# Written by fdl scripts/setup-registry.sh: a loopback registry for tests.
version: 0.1
storage:
  filesystem:
    rootdirectory: $ROOT
  delete:
    enabled: true
http:
  addr: $ADDR
YAML
log "starting docker-registry on $ADDR"
(
  docker-registry serve "$CONF" >"$LOG" 2>&1 &
  echo $! > "$PIDFILE"
)
for _ in $(seq 1 40); do
  if curl -sf "http://$ADDR/v2/" >/dev/null 2>&1; then
    log "registry is up on $ADDR"
    exit 0
  fi
  sleep 0.25
done
log "warning: the registry did not answer; see $LOG"
exit 1
