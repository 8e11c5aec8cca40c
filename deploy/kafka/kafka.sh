#!/usr/bin/env bash
# Single-node Apache Kafka 3.9.2 (KRaft, broker+controller in one JVM) on 127.0.0.1, from Maven
# Central jars: no tarball, no Docker. For dev and CI.
#
# usage: kafka.sh fetch|start|stop|status|with CMD...|help
#   fetch   copy the broker jars into $KAFKA_WORK/libs (skipped while pom.xml is unchanged)
#   start   fetch, fresh data dir, start in background, wait until ready (no-op if already up)
#   stop    stop the broker this script started on KAFKA_PORT, and wait for it to exit
#   status  exit 0 if a broker listens on the port, 3 if not
#   with    run CMD with a broker up; stop it afterwards only if this call started it;
#           exits with CMD's status; exports LOOPWATCH_KAFKA_BOOTSTRAP (tests) unless set
#   help    print this text
# Every port has its own broker state in $KAFKA_WORK/port-$KAFKA_PORT (pidfile, config, KRaft
# storage template, data, logs/kafka.out), so brokers on different ports never see, stop or wipe
# each other; only the jars ($KAFKA_WORK/libs) are shared.
# env: KAFKA_WORK (<repo>/.work/kafka), KAFKA_PORT (9092),
#      KAFKA_CONTROLLER_PORT (KAFKA_PORT + 1: 9093 by default; KAFKA_PORT=9192 alone gives 9193),
#      KAFKA_START_TIMEOUT (s, 300: until the broker listens; the readiness probe gets what is left, at
#      least 60 s. A broker that starts in 5 s on an idle machine took 30-90 s at a load average of 15
#      on 2 cores; one that fails exits, noticed at once), KAFKA_HEAP_OPTS (-Xms256m -Xmx1g),
#      KAFKA_JVM_OPTS (extra),
#      KAFKA_PYTHON (python with aiokafka for wait_ready.py; <repo>/.venv/bin/python),
#      KAFKA_KEEP_DATA (1: start on the port's data of the last run, if any, instead of a fresh
#      cluster: a broker restart with its topics and committed offsets, as in production)
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
WORK="${KAFKA_WORK:-$ROOT/.work/kafka}"
PORT="${KAFKA_PORT:-9092}"
[[ "$PORT" =~ ^[0-9]+$ ]] || { echo "kafka.sh: ERROR: KAFKA_PORT must be a port number, got '$PORT'" >&2; exit 2; }
CPORT="${KAFKA_CONTROLLER_PORT:-$((10#$PORT + 1))}"  # next to the broker's, so brokers on other ports never clash
TIMEOUT="${KAFKA_START_TIMEOUT:-300}"
NOTE_EVERY=30                              # s: a start-up that takes longer says so, with the machine's load
PY="${KAFKA_PYTHON:-$ROOT/.venv/bin/python}"
CLUSTER_ID=MkU3OEVBNTcwNTJENDM2Qk          # any valid Kafka Uuid; data is fresh every start
LIBS="$WORK/libs"                          # shared by every port
STATE="$WORK/port-$PORT"                   # this port's broker only
DATA="$STATE/data" LOGS="$STATE/logs" PIDFILE="$STATE/kafka.pid" CONF="$STATE/server.properties"
# Before state dirs were per port, one pidfile served every port (config $WORK/server.properties):
# a broker started that way is still recognised (and stopped) on the port it really listens on.
LEGACY_PIDFILE="$WORK/kafka.pid"
STARTED=0                                  # 1 once this call launched a JVM (with: stop it after)
read -r -a HEAP <<< "${KAFKA_HEAP_OPTS:--Xms256m -Xmx1g}"
read -r -a EXTRA <<< "${KAFKA_JVM_OPTS:-}"
# GC flags as in Kafka's kafka-run-class.sh. C1-only JIT (TieredStopAtLevel=1) halves JIT work
# during start-up on 2 cores; fine for test traffic.
JVM=(java "${HEAP[@]}" -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35
     -XX:+ExplicitGCInvokesConcurrent -XX:TieredStopAtLevel=1 -Djava.awt.headless=true
     "-Dlog4j.configuration=file:$HERE/log4j.properties" "-Dkafka.logs.dir=$LOGS" ${EXTRA[@]+"${EXTRA[@]}"}
     -cp "$LIBS/*")                         # quoted: java expands the classpath wildcard itself

say() { echo "kafka.sh: $*"; }
die() { echo "kafka.sh: ERROR: $*" >&2; exit 1; }
now_ms() { local t=${EPOCHREALTIME/[.,]/}; echo $(( 10#$t / 1000 )); }
since() { local d=$(( $(now_ms) - $1 )); printf '%d.%01d' $((d / 1000)) $((d % 1000 / 100)); }
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
load_note() { echo "load average $(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo '?') on $(nproc 2>/dev/null || echo '?') CPUs"; }
log_tail() { echo "---- last 40 lines of $LOGS/kafka.out ----" >&2; tail -n 40 "$LOGS/kafka.out" >&2 || true; }
# runs PID TEXT: PID is alive and its command line contains TEXT.
runs() {
  [[ "$1" =~ ^[0-9]+$ ]] && kill -0 "$1" 2>/dev/null \
    && tr '\0' ' ' < "/proc/$1/cmdline" 2>/dev/null | grep -qF -- "$2"
}
# listens PID PORT: PID has a TCP socket listening on PORT (IPv4 or IPv6), from /proc.
listens() {
  local hex ino fd; hex="$(printf '%04X' "$2")"
  for ino in $(awk -v p=":$hex" '$4 == "0A" && substr($2, length($2) - 4) == p { print $10 }' \
                 /proc/net/tcp /proc/net/tcp6 2>/dev/null); do
    for fd in /proc/"$1"/fd/*; do [[ "$(readlink "$fd" 2>/dev/null)" == "socket:[$ino]" ]] && return 0; done
  done
  return 1
}
# Finds the broker this script started on $PORT: sets OUR_PID and OUR_PIDFILE, or returns 1.
# PIDs get reused, so the process must be alive and run kafka.Kafka with this port's config; a
# legacy-pidfile broker (config path names no port) must really listen on $PORT.
find_ours() {
  local pid
  if pid="$(cat "$PIDFILE" 2>/dev/null)" && runs "$pid" "kafka.Kafka $CONF"; then
    OUR_PID=$pid OUR_PIDFILE=$PIDFILE; return 0
  fi
  if pid="$(cat "$LEGACY_PIDFILE" 2>/dev/null)" && runs "$pid" kafka.Kafka && listens "$pid" "$PORT"; then
    OUR_PID=$pid OUR_PIDFILE=$LEGACY_PIDFILE; return 0
  fi
  return 1
}
# The comment block at the top of this file, without its '# '.
usage() { sed -n '2,/^set -euo/{/^set -euo/d; s/^# \{0,1\}//; p}' "${BASH_SOURCE[0]}"; }
have_probe() { [[ -x "$PY" ]] && "$PY" -c 'import aiokafka' 2>/dev/null; }

fetch() {
  local stamp="$LIBS/.pom.sha256" want t0; want="$(sha256sum "$HERE/pom.xml" | cut -c1-64)"
  if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]] && compgen -G "$LIBS/kafka_2.13-*.jar" > /dev/null; then
    say "jars cached in $LIBS"; return 0
  fi
  command -v mvn > /dev/null || die "mvn not found (needs Maven and Java 17)"
  say "fetching broker jars with Maven into $LIBS (cold ~25 s; warm from ~/.m2 ~5 s)"
  t0=$(now_ms); rm -rf "$LIBS"             # a changed POM must not leave stale jars behind
  mkdir -p "$WORK"                         # mvn output to a file: Debian's mvn prints stray ANSI codes
  mvn -B -ntp -q -f "$HERE/pom.xml" "-Dkafka.libs.dir=$LIBS" dependency:copy-dependencies \
      > "$WORK/mvn.log" 2>&1 || { tail -n 30 "$WORK/mvn.log" >&2; die "mvn dependency:copy-dependencies failed"; }
  compgen -G "$LIBS/kafka_2.13-*.jar" > /dev/null || die "no kafka_2.13 jar in $LIBS after mvn"
  echo "$want" > "$stamp"
  say "fetched $(ls "$LIBS" | wc -l) jars in $(since "$t0")s"
}

start() {
  local pid t0
  if find_ours; then
    pid=$OUR_PID t0=$(now_ms)
    # started by another call that is still waiting for it: wait too, but leave it to that call
    port_open "$PORT" || say "the broker this script started on 127.0.0.1:$PORT (pid $pid) is starting: waiting"
    until port_open "$PORT"; do
      kill -0 "$pid" 2>/dev/null || die "the broker starting on 127.0.0.1:$PORT (pid $pid) exited; see $LOGS/kafka.out"
      (( $(now_ms) - t0 > TIMEOUT * 1000 )) && die "the broker on 127.0.0.1:$PORT (pid $pid) not listening within ${TIMEOUT}s ($(load_note))"
      sleep 0.2
    done
    say "already running on 127.0.0.1:$PORT (pid $pid)"; return 0
  fi
  if port_open "$PORT"; then               # someone else's broker (or not a broker at all)
    if have_probe && ! "$PY" "$HERE/wait_ready.py" "127.0.0.1:$PORT" 15 > /dev/null; then
      die "127.0.0.1:$PORT is in use by something that is not a working Kafka broker"
    fi
    say "a broker not started by this script is already running on 127.0.0.1:$PORT; using it"
    return 0
  fi
  [[ "$CPORT" =~ ^[0-9]+$ ]] && (( 10#$CPORT <= 65535 )) \
    || die "controller port $CPORT is not a port (KAFKA_CONTROLLER_PORT, default KAFKA_PORT + 1): set KAFKA_CONTROLLER_PORT"
  port_open "$CPORT" && die "controller port 127.0.0.1:$CPORT is in use (set KAFKA_CONTROLLER_PORT)"
  command -v java > /dev/null || die "java not found (Kafka 3.9 needs Java 11+, 17 recommended)"
  fetch
  t0=$(now_ms)
  mkdir -p "$STATE" "$LOGS"
  sed -e "s#@PORT@#$PORT#g" -e "s#@CONTROLLER_PORT@#$CPORT#g" -e "s#@DATA_DIR@#$DATA#g" \
      "$HERE/server.properties" > "$CONF"
  # Fresh cluster every start. Formatting is a separate ~1.5 s JVM run, so format once into a
  # template (meta.properties + bootstrap.checkpoint) and copy it; re-format when the config changes.
  local tmpl="$STATE/formatted" sum; sum="$(cat "$CONF" "$HERE/pom.xml" | sha256sum | cut -c1-64)"
  if [[ "$(cat "$tmpl.sha256" 2>/dev/null)" != "$sum" ]]; then
    say "formatting KRaft storage template"
    rm -rf "$tmpl"
    sed "s#^log.dirs=.*#log.dirs=$tmpl#" "$CONF" > "$STATE/format.properties"
    "${JVM[@]}" kafka.tools.StorageTool format -t "$CLUSTER_ID" -c "$STATE/format.properties" \
      > "$LOGS/format.out" 2>&1 || { tail -n 20 "$LOGS/format.out" >&2; die "StorageTool format failed"; }
    echo "$sum" > "$tmpl.sha256"
  fi
  if [[ "${KAFKA_KEEP_DATA:-0}" == 1 && -f "$DATA/meta.properties" ]]; then
    say "keeping the data of the last run ($DATA)"
  else
    rm -rf "$DATA"; cp -a "$tmpl" "$DATA"
  fi
  say "starting broker on 127.0.0.1:$PORT (controller :$CPORT, heap ${HEAP[*]}, log $LOGS/kafka.out)"
  # Must be a simple command so that $! is the JVM itself (cd x && nohup ... & would give a subshell).
  nohup "${JVM[@]}" kafka.Kafka "$CONF" > "$LOGS/kafka.out" 2>&1 < /dev/null &
  pid=$!; echo "$pid" > "$PIDFILE"; STARTED=1
  # "Kafka Server started" is logged once the broker is unfenced; the listener opens only then.
  local noted=$t0 left
  until grep -q "Kafka Server started" "$LOGS/kafka.out" 2>/dev/null && port_open "$PORT"; do
    kill -0 "$pid" 2>/dev/null || { log_tail; rm -f "$PIDFILE"; STARTED=0; die "broker exited during start-up"; }
    if (( $(now_ms) - t0 > TIMEOUT * 1000 )); then
      log_tail; stop; die "broker not ready within ${TIMEOUT}s (KAFKA_START_TIMEOUT; $(load_note))"
    fi
    if (( $(now_ms) - noted >= NOTE_EVERY * 1000 )); then
      noted=$(now_ms); say "still starting after $(since "$t0")s ($(load_note)); waiting up to ${TIMEOUT}s"
    fi
    sleep 0.2
  done
  say "broker listening after $(since "$t0")s (pid $pid)"
  if have_probe; then                      # internal topics + round trip; see wait_ready.py
    left=$(( TIMEOUT - ($(now_ms) - t0) / 1000 )); (( left >= 60 )) || left=60  # the rest of the start's time
    "$PY" "$HERE/wait_ready.py" "127.0.0.1:$PORT" "$left" \
      || { log_tail; stop; die "broker up but readiness probe failed ($(load_note))"; }
  else
    say "no python with aiokafka at $PY: skipped the readiness probe (port + log line only)"
  fi
  say "ready on 127.0.0.1:$PORT in $(since "$t0")s (pid $pid)"
}

stop() {
  local pid t0
  STARTED=0
  if ! find_ours; then
    rm -f "$PIDFILE"                       # stale; the legacy one only once its broker is gone:
    runs "$(cat "$LEGACY_PIDFILE" 2>/dev/null)" kafka.Kafka || rm -f "$LEGACY_PIDFILE"
    if port_open "$PORT"; then say "not stopping 127.0.0.1:$PORT: not started by this script ($STATE)"
    else say "not running"; fi
    return 0
  fi
  pid=$OUR_PID t0=$(now_ms)
  say "stopping broker (pid $pid)"
  kill -TERM "$pid"                        # JVM shutdown hook: controlled shutdown, flushes logs
  while kill -0 "$pid" 2>/dev/null && (( $(now_ms) - t0 < 30000 )); do sleep 0.2; done
  if kill -0 "$pid" 2>/dev/null; then say "still alive after 30 s, sending SIGKILL"; kill -KILL "$pid"; fi
  while kill -0 "$pid" 2>/dev/null || port_open "$PORT"; do sleep 0.1; done
  rm -f "$OUR_PIDFILE"
  say "stopped in $(since "$t0")s"
}

status() {
  if find_ours; then
    if ! port_open "$PORT"; then say "starting on 127.0.0.1:$PORT (pid $OUR_PID; port not open yet)"; return 3; fi
    say "running on 127.0.0.1:$PORT (pid $OUR_PID, pidfile $OUR_PIDFILE)"; return 0
  fi
  if port_open "$PORT"; then say "something not started by this script listens on 127.0.0.1:$PORT"; return 0; fi
  say "not running (127.0.0.1:$PORT closed)"; return 3
}

with() {
  (( $# )) || die "usage: kafka.sh with CMD [ARGS...]"
  if port_open "$PORT"; then
    say "broker already running on 127.0.0.1:$PORT: leaving it running afterwards"
  else
    # Trap first, so a failed or interrupted start-up is cleaned up too; it stops only a broker
    # this call launched (not one another call is starting on the same port). CMD's status is kept.
    trap '(( STARTED )) && stop' EXIT
    start
  fi
  # tests/conftest.py reads this; lets KAFKA_PORT alone move a whole test run to another port
  export LOOPWATCH_KAFKA_BOOTSTRAP="${LOOPWATCH_KAFKA_BOOTSTRAP:-127.0.0.1:$PORT}"
  local rc=0; "$@" || rc=$?
  exit "$rc"
}

cmd="${1:-}"; shift || true
case "$cmd" in
  fetch|start|stop|status) "$cmd" ;;
  with) with "$@" ;;
  help|-h|--help) usage ;;
  *) usage >&2; exit 2 ;;
esac
