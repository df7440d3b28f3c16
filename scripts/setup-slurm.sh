#!/usr/bin/env bash
# A one-node SLURM cluster on this machine for fdl's deploy tests: munge + slurmctld +
# slurmd from Debian's slurm-wlm, a minimal slurm.conf, listening on 127.0.0.1 only.
#
# Idempotent: installs what is missing, rewrites the config only when it changed, and
# starts the daemons that do not answer. Needs root. Prints nothing but [slurm] log lines.
set -euo pipefail

log() { printf '[slurm] %s\n' "$*" >&2; }
if [ "$(id -u)" != "0" ]; then log "warning: not root, skipping the local SLURM cluster"; exit 0; fi

missing=()
for pkg in slurm-wlm munge shellcheck; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ "${#missing[@]}" -gt 0 ]; then
  log "installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# munge: a key, then the daemon.
if [ ! -s /etc/munge/munge.key ]; then
  log "creating the munge key"
  mkdir -p /etc/munge
  dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key status=none
fi
chown munge:munge /etc/munge/munge.key 2>/dev/null || true
chmod 400 /etc/munge/munge.key
mkdir -p /run/munge /var/lib/munge /var/log/munge
chown munge:munge /run/munge /var/lib/munge /var/log/munge 2>/dev/null || true
if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
  log "starting munged"
  runuser -u munge -- /usr/sbin/munged --force 2>/dev/null || /usr/sbin/munged --force
  # Marked as ours: the watchdog stops munged only when this script started it.
  cp /run/munge/munged.pid /run/fdl-munged.pid 2>/dev/null || true
fi

# Stopped by themselves once the test runs that use them have ended (registered first,
# so a watchdog stopping them now waits for this run): the jobs left on this test
# cluster (a killed test's sleeping job) are cancelled, then slurmctld, slurmd, and
# munged when this script started it.
# shellcheck disable=SC2016  # expanded by the watchdog when it stops them
"$(dirname "$0")/server-watchdog.sh" slurm '
  squeue -h -o %i 2>/dev/null | xargs -r scancel 2>/dev/null
  sleep 1
  for f in /run/slurmctld.pid /run/slurmd.pid; do [ -f "$f" ] && kill "$(cat "$f")"; done
  if [ -f /run/fdl-munged.pid ] && [ "$(cat /run/fdl-munged.pid)" = "$(cat /run/munge/munged.pid 2>/dev/null)" ]; then
    kill "$(cat /run/fdl-munged.pid)"
  fi
  rm -f /run/fdl-munged.pid
  true'

CPUS="$(nproc)"
MEM_MB="$(awk '/MemTotal/ {print int($2 / 1024 * 0.8)}' /proc/meminfo)"
mkdir -p /etc/slurm /var/spool/slurmctld /var/spool/slurmd /var/log/slurm
conf="$(cat <<CONF
# Written by fdl scripts/setup-slurm.sh: a one-node cluster for tests.
ClusterName=fdl
SlurmctldHost=localhost(127.0.0.1)
SlurmctldAddr=127.0.0.1
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldPort=6817
SlurmdPort=6818
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
JobCompType=jobcomp/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
InactiveLimit=0
KillWait=5
MinJobAge=300
# Bind the daemons (and srun) to the node's address, 127.0.0.1, not to every interface.
CommunicationParameters=NoInAddrAny
NodeName=localhost NodeAddr=127.0.0.1 CPUs=${CPUS} RealMemory=${MEM_MB} State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
CONF
)"
if [ "$(cat /etc/slurm/slurm.conf 2>/dev/null)" != "$conf" ]; then
  log "writing /etc/slurm/slurm.conf"
  printf '%s\n' "$conf" > /etc/slurm/slurm.conf
  restart=1
else
  restart=0
fi

if [ "$restart" = "1" ]; then
  for pidfile in /run/slurmctld.pid /run/slurmd.pid; do
    if [ -f "$pidfile" ]; then kill "$(cat "$pidfile")" 2>/dev/null || true; fi
  done
  sleep 1
fi
# slurmctld of Slurm 22.05 ignores NoInAddrAny for its own port and binds 0.0.0.0: a
# small preloaded library turns its wildcard binds into 127.0.0.1 (test servers listen
# on loopback only). slurmd honours NoInAddrAny and needs none.
SHIM=/usr/local/lib/fdl-bind-loopback.so
if [ ! -s "$SHIM" ]; then
  log "building $SHIM"
  cat > /tmp/fdl-bind-loopback.c <<'C'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
/* bind() with INADDR_ANY (IPv4) or in6addr_any (IPv6) binds the loopback address instead. */
int bind(int fd, const struct sockaddr *addr, socklen_t len) {
  static int (*real)(int, const struct sockaddr *, socklen_t);
  if (!real) real = (int (*)(int, const struct sockaddr *, socklen_t))dlsym(RTLD_NEXT, "bind");
  if (addr && addr->sa_family == AF_INET && len >= (socklen_t)sizeof(struct sockaddr_in)) {
    struct sockaddr_in v4;
    memcpy(&v4, addr, sizeof v4);
    if (v4.sin_addr.s_addr == htonl(INADDR_ANY)) {
      v4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      return real(fd, (const struct sockaddr *)&v4, sizeof v4);
    }
  }
  if (addr && addr->sa_family == AF_INET6 && len >= (socklen_t)sizeof(struct sockaddr_in6)) {
    struct sockaddr_in6 v6;
    memcpy(&v6, addr, sizeof v6);
    if (memcmp(&v6.sin6_addr, &in6addr_any, sizeof in6addr_any) == 0) {
      v6.sin6_addr = in6addr_loopback;
      return real(fd, (const struct sockaddr *)&v6, sizeof v6);
    }
  }
  return real(fd, addr, len);
}
C
  gcc -shared -fPIC -O2 -o "$SHIM" /tmp/fdl-bind-loopback.c -ldl
  rm -f /tmp/fdl-bind-loopback.c
fi
if ! scontrol ping 2>/dev/null | grep -q UP; then
  log "starting slurmctld (bound to 127.0.0.1)"
  LD_PRELOAD="$SHIM" /usr/sbin/slurmctld -i
fi
slurmd_alive() {
  local pid
  pid="$(cat /run/slurmd.pid 2>/dev/null)" && [ -n "$pid" ] && ps -o stat= -p "$pid" | grep -qv '^Z'
}
slurmd_alive || { log "starting slurmd"; /usr/sbin/slurmd; }
for _ in $(seq 1 40); do
  if sinfo -h -o '%T' 2>/dev/null | grep -qE '^(idle|mixed|allocated)$'; then
    log "SLURM is up: $(sinfo -h -o '%P %D %T' | head -1)"
    exit 0
  fi
  scontrol update NodeName=localhost State=RESUME >/dev/null 2>&1 || true
  sleep 0.5
done
log "warning: SLURM did not come up; see /var/log/slurm/slurmctld.log and slurmd.log"
sinfo >&2 || true
exit 1
