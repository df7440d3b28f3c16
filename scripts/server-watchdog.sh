#!/usr/bin/env bash
# Stops the servers fdl's test setup starts (the local SLURM cluster, the registry) by
# themselves: when every test run that asked for them has ended, or after
# FDL_SERVER_MAX_MINUTES (default 180; FDL_SERVER_MAX_SECONDS overrides it) at most.
#
#   server-watchdog.sh NAME STOP_COMMAND
#
# The setup scripts call it BEFORE they check or start their servers. Each call registers
# $FDL_SERVERS_OWNER (the PID of the test run; scripts/test.sh sets it) as a user of NAME;
# the first call starts one watchdog for NAME, which checks every 10 s and runs
# STOP_COMMAND once no registered owner is alive. Registering and stopping hold the same
# lock, so a run that registers is never left with stopped servers. Without an owner (a
# setup script run by hand) only the maximum lifetime applies.
set -euo pipefail
name="$1"
stop="$2"
mkdir -p /run/fdl-servers
dir="/run/fdl-servers/$name"
lock="/run/fdl-servers/$name.lock"
exec 9>"$lock"
flock 9
mkdir -p "$dir"
touch "$dir/owners"
if [ -f "$dir/watchdog.pid" ] && kill -0 "$(cat "$dir/watchdog.pid")" 2>/dev/null; then
  if [ -n "${FDL_SERVERS_OWNER:-}" ]; then echo "$FDL_SERVERS_OWNER" >> "$dir/owners"; fi
  exit 0  # one watchdog per server set; it now also waits for this owner
fi
# A new watchdog: owners left by one that is gone (killed, or a machine restarted) are
# forgotten, or it would find them dead and stop the servers just started for this run.
: > "$dir/owners"
if [ -n "${FDL_SERVERS_OWNER:-}" ]; then echo "$FDL_SERVERS_OWNER" >> "$dir/owners"; fi
max="${FDL_SERVER_MAX_SECONDS:-$(( ${FDL_SERVER_MAX_MINUTES:-180} * 60 ))}"
setsid nohup bash -c '
  dir="$1"; lock="$2"; stop="$3"; max="$4"; start=$(date +%s)
  while sleep "${FDL_SERVER_CHECK_SECONDS:-10}"; do
    exec 9>"$lock"
    flock 9
    alive=0; owners=0
    for pid in $(sort -u "$dir/owners" 2>/dev/null); do
      owners=1
      if kill -0 "$pid" 2>/dev/null; then alive=1; fi
    done
    elapsed=$(( $(date +%s) - start ))
    if { [ "$owners" = 1 ] && [ "$alive" = 0 ]; } || [ "$elapsed" -ge "$max" ]; then
      echo "[fdl] $(date -u +%FT%TZ) stopping $dir (owners gone or ${elapsed}s up)" >> /var/log/fdl-servers.log
      eval "$stop" >> /var/log/fdl-servers.log 2>&1 || true
      rm -rf "$dir"
      exit 0
    fi
    flock -u 9
  done
' watchdog "$dir" "$lock" "$stop" "$max" 9>&- >/dev/null 2>&1 &
echo $! > "$dir/watchdog.pid"
