#!/usr/bin/env bash
# A container registry on 127.0.0.1 for fdl's push-by-digest tests: Debian's
# docker-registry (distribution v2), no auth, listening on loopback only.
#
# Idempotent: installs it when missing, starts it when nothing answers. Needs root.
set -euo pipefail

ADDR="${FDL_TEST_REGISTRY:-127.0.0.1:5000}"
log() { printf '[registry] %s\n' "$*" >&2; }
if [ "$(id -u)" != "0" ]; then log "warning: not root, skipping the local registry"; exit 0; fi
# Stopped by itself once the test runs that use it have ended (registered first).
"$(dirname "$0")/server-watchdog.sh" registry 'pkill -f "^docker-registry serve /etc/fdl/registry.yml"'
if curl -sf "http://$ADDR/v2/" >/dev/null 2>&1; then exit 0; fi
if ! command -v docker-registry >/dev/null; then
  log "installing docker-registry"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends docker-registry >/dev/null
fi
mkdir -p /etc/fdl /var/lib/fdl-registry
cat > /etc/fdl/registry.yml <<CONF
# Written by fdl scripts/setup-registry.sh: a loopback registry for tests.
version: 0.1
storage:
  filesystem:
    rootdirectory: /var/lib/fdl-registry
  delete:
    enabled: true
http:
  addr: $ADDR
CONF
log "starting docker-registry on $ADDR"
(docker-registry serve /etc/fdl/registry.yml >/var/log/fdl-registry.log 2>&1 &)
for _ in $(seq 1 40); do
  if curl -sf "http://$ADDR/v2/" >/dev/null 2>&1; then
    log "registry is up on $ADDR"
    exit 0
  fi
  sleep 0.25
done
log "warning: the registry did not answer; see /var/log/fdl-registry.log"
exit 1
