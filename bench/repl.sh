#!/usr/bin/env bash
# Replication's cost, side by side in one run: celld's CL.THROTTLE (a limit
# no key reaches, so every call writes its key) with replication off,
# async and sync (each leader with one follower process on loopback), and
# redis-server 7's SET with a `replicaof` replica on loopback as the
# reference (and a redis-server without one, for Redis's own cost). Rows:
# P1 latency (c=50, pipeline 1) and P16 throughput (c=50, pipeline 16).
# Each row alternates the five servers ROUNDS times and
# prints medians (req/s, p50 and p99 medianed separately), and the
# serving process's CPU µs per call (utime+stime from /proc over the run
# ÷ calls: the leader's for celld, the primary's for Redis).
#
# Persistence is off on every server (celld --persist no; redis --save ''
# --appendonly no), so the rows differ by replication alone.
#
# The load comes from bench/replload (redis-benchmark's shape: C
# connections, pipelines of P, random keys), because redis-benchmark stops
# at the first error reply and a leader refuses writes (-TRYAGAIN) while
# its replication lags more than LAG (celld's --max-replica-lag, default
# 10ms). "errors" is the median count of error replies in a run (they are
# counted in req/s like any reply); "refused" is the leader's own count of
# refused writes over the row. LAG=1s measures the stream's cost without
# refusals.
#
#   bash bench/repl.sh                   # ~3 minutes
#   N=100000 ROUNDS=1 bash bench/repl.sh # quick look
#
# BEFORE=REV adds an async leader (and its follower) built from git
# revision REV to the rotation, row "async@REV": a before/after of a
# replication change in one run. BASE_BIN=PATH adds a whole second set
# (off, async, sync, with their followers) run from a built binary, rows
# "off@base" ...: the same before/after for every mode. ROWS="P16" runs
# only that row; N1 is the requests per P1 run (default N). "f-cpu" is
# the follower's (Redis's replica's) CPU µs per leader call over the same
# run.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh

for tool in redis-server redis-cli go; do
  command -v "$tool" >/dev/null || { echo "missing $tool (apt-get install redis-server redis-tools)" >&2; exit 1; }
done

N=${N:-200000}
LAG=${LAG:-10ms}
ROUNDS=${ROUNDS:-3}
KEYS=${KEYS:-100000}
BASE=${BASE:-$((20000 + RANDOM % 2000))} # ports BASE..BASE+7, repl ports +10000
OFF=$BASE ASYNC=$((BASE + 1)) ASYNCF=$((BASE + 2)) SYNC=$((BASE + 3)) SYNCF=$((BASE + 4)) REDIS=$((BASE + 5)) REDISR=$((BASE + 6)) REDIS0=$((BASE + 7))
BOFF=$((BASE + 11)) BASYNC=$((BASE + 12)) BASYNCF=$((BASE + 13)) BSYNC=$((BASE + 14)) BSYNCF=$((BASE + 15))
N1=${N1:-$N}
BASE_BIN=${BASE_BIN:-}
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; for p in $REDIS $REDISR $REDIS0; do redis-cli -p $p shutdown nosave >/dev/null 2>&1 || true; done; rm -rf "$work"' EXIT

# CELLD_BIN / REPLLOAD_BIN: use these builds instead of building here
# (build before taking the bench lock).
if [ -n "${CELLD_BIN:-}" ]; then cp "$CELLD_BIN" "$work/celld"; else go build -o "$work/celld" .; fi
if [ -n "${REPLLOAD_BIN:-}" ]; then cp "$REPLLOAD_BIN" "$work/replload"; else go build -o "$work/replload" ./bench/replload; fi
unset CELLD_BIN
BEFORE=${BEFORE:-}
ROWS=${ROWS:-P1 P16}
BEF=$((BASE + 8)) BEFF=$((BASE + 9))
if [ -n "$BEFORE" ]; then
  git worktree add -q --detach "$work/src-before" "$BEFORE"
  (cd "$work/src-before" && go build -o "$work/celld-before" .)
  git worktree remove --force "$work/src-before"
fi
cputicks() { awk '{ sub(/.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"; } # utime+stime of a pid
declare -A PID
celld() { # port dir args... (CELLD_BIN: another binary)
  local port=$1 dir=$2; shift 2
  "${CELLD_BIN:-$work/celld}" --addr 127.0.0.1:$port --persist no --dir "$work/$dir" "$@" 2>"$work/$dir.log" &
  PID[$port]=$!
}
celld $OFF off
celld $ASYNC async --replication yes --replica-ack async --max-replica-lag "$LAG"
celld $SYNC sync --replication yes --replica-ack sync --max-replica-lag "$LAG"
sleep 0.3
celld $ASYNCF asyncf --replicate-from 127.0.0.1:$((ASYNC + 10000)) --replica-ack async
celld $SYNCF syncf --replicate-from 127.0.0.1:$((SYNC + 10000)) --replica-ack sync
SERVERS="$OFF $ASYNC $ASYNCF $SYNC $SYNCF"
if [ -n "$BEFORE" ]; then
  CELLD_BIN="$work/celld-before" celld $BEF bef --replication yes --replica-ack async --max-replica-lag "$LAG"
  sleep 0.3
  CELLD_BIN="$work/celld-before" celld $BEFF beff --replicate-from 127.0.0.1:$((BEF + 10000)) --replica-ack async
  SERVERS="$SERVERS $BEF $BEFF"
fi
if [ -n "$BASE_BIN" ]; then
  CELLD_BIN="$BASE_BIN" celld $BOFF boff
  CELLD_BIN="$BASE_BIN" celld $BASYNC basync --replication yes --replica-ack async --max-replica-lag "$LAG"
  CELLD_BIN="$BASE_BIN" celld $BSYNC bsync --replication yes --replica-ack sync --max-replica-lag "$LAG"
  sleep 0.3
  CELLD_BIN="$BASE_BIN" celld $BASYNCF basyncf --replicate-from 127.0.0.1:$((BASYNC + 10000)) --replica-ack async
  CELLD_BIN="$BASE_BIN" celld $BSYNCF bsyncf --replicate-from 127.0.0.1:$((BSYNC + 10000)) --replica-ack sync
  SERVERS="$SERVERS $BOFF $BASYNC $BASYNCF $BSYNC $BSYNCF"
fi
mkdir -p "$work/r" "$work/rr" "$work/r0" # a full sync writes dump.rdb into --dir
redis-server --port $REDIS --dir "$work/r" --save '' --appendonly no --daemonize no >"$work/redis.log" 2>&1 &
PID[$REDIS]=$!
redis-server --port $REDISR --dir "$work/rr" --save '' --appendonly no --daemonize no --replicaof 127.0.0.1 $REDIS >"$work/redisr.log" 2>&1 &
PID[$REDISR]=$!
redis-server --port $REDIS0 --dir "$work/r0" --save '' --appendonly no --daemonize no >"$work/redis0.log" 2>&1 &
PID[$REDIS0]=$!
for p in $SERVERS $REDIS $REDISR $REDIS0; do
  for _ in $(seq 50); do redis-cli -p $p ping >/dev/null 2>&1 && break; sleep 0.1; done
  redis-cli -p $p ping 2>/dev/null | grep -q PONG ||
    { echo "no server answering on port $p (see $work/*.log)" >&2; tail -3 "$work"/*.log >&2; exit 1; }
done
for p in $ASYNCF $SYNCF $([ -n "$BEFORE" ] && echo $BEFF) $([ -n "$BASE_BIN" ] && echo $BASYNCF $BSYNCF); do
  for _ in $(seq 100); do redis-cli -p $p celld.repl status | grep -q 'synced:true' && break; sleep 0.1; done
done
for _ in $(seq 100); do redis-cli -p $REDISR info replication | grep -q 'master_link_status:up' && break; sleep 0.1; done

# bench PORT FOLLOWER-PORT|- CLIENTS PIPELINE ARGS...
#   -> "rps p50 p99 errors cpu-us-per-call follower-cpu-us-per-call"
bench() {
  local port=$1 fport=$2 c=$3 p=$4 t0 t1 f0=0 f1=0 out n=$N; shift 4
  [ "$p" = 1 ] && n=$N1
  t0=$(cputicks "${PID[$port]}")
  [ "$fport" != - ] && f0=$(cputicks "${PID[$fport]}")
  out=$("$work/replload" -addr 127.0.0.1:"$port" -c "$c" -P "$p" -n "$n" -r "$KEYS" "$@" 2>/dev/null || true)
  t1=$(cputicks "${PID[$port]}")
  [ "$fport" != - ] && f1=$(cputicks "${PID[$fport]}")
  [ -n "$out" ] && printf '%s %.2f %.2f\n' "$out" "$(echo "($t1 - $t0) * 1000000 / $(getconf CLK_TCK) / $n" | bc -l)" \
    "$(echo "($f1 - $f0) * 1000000 / $(getconf CLK_TCK) / $n" | bc -l)"
  return 0
}
refused() { redis-cli -p "$1" celld.repl status | tr -d '\r' | awk -F: '$1 == "refused_writes" { print $2 }'; }
lagline() { redis-cli -p "$1" celld.repl status | tr -d '\r' | awk -F: '$1 ~ /lag_p(50|99)_us|bytes_per_sec/ { printf "%s=%s ", $1, $2 }'; }

THR=(CL.THROTTLE ok:__rand_int__ 1000000 1 1)
SET=(SET key:__rand_int__ 1796012296590996844)
# Warm every server with the key set (then every row overwrites).
for p in $OFF $ASYNC $SYNC $([ -n "$BEFORE" ] && echo $BEF) $([ -n "$BASE_BIN" ] && echo $BOFF $BASYNC $BSYNC); do "$work/replload" -addr 127.0.0.1:$p -c 50 -P 16 -n $((KEYS * 2)) -r "$KEYS" "${THR[@]}" >/dev/null 2>&1 || true; done
for p in $REDIS $REDIS0; do "$work/replload" -addr 127.0.0.1:$p -c 50 -P 16 -n $((KEYS * 2)) -r "$KEYS" "${SET[@]}" >/dev/null 2>&1; done

printf '%-8s %-10s %12s %8s %8s %8s %7s %7s %9s %8s\n' row server "req/s" "p50 ms" "p99 ms" errors "cpu us" "f-cpu" refused failed
row() { # label clients pipeline
  local label=$1 c=$2 p=$3 off="" asy="" bef="" syn="" red="" red0="" boff="" basy="" bsyn="" r0a r0s r0b=0 r0ba=0 r0bs=0 l
  r0a=$(refused $ASYNC) r0s=$(refused $SYNC)
  [ -n "$BEFORE" ] && r0b=$(refused $BEF)
  [ -n "$BASE_BIN" ] && r0ba=$(refused $BASYNC) r0bs=$(refused $BSYNC)
  for _ in $(seq "$ROUNDS"); do
    # mine and base alternate within each mode
    l=$(bench $OFF - "$c" "$p" "${THR[@]}"); [ -n "$l" ] && off+="$l"$'\n'
    if [ -n "$BASE_BIN" ]; then l=$(bench $BOFF - "$c" "$p" "${THR[@]}"); [ -n "$l" ] && boff+="$l"$'\n'; fi
    l=$(bench $ASYNC $ASYNCF "$c" "$p" "${THR[@]}"); [ -n "$l" ] && asy+="$l"$'\n'
    if [ -n "$BASE_BIN" ]; then l=$(bench $BASYNC $BASYNCF "$c" "$p" "${THR[@]}"); [ -n "$l" ] && basy+="$l"$'\n'; fi
    if [ -n "$BEFORE" ]; then l=$(bench $BEF $BEFF "$c" "$p" "${THR[@]}"); [ -n "$l" ] && bef+="$l"$'\n'; fi
    l=$(bench $SYNC $SYNCF "$c" "$p" "${THR[@]}"); [ -n "$l" ] && syn+="$l"$'\n'
    if [ -n "$BASE_BIN" ]; then l=$(bench $BSYNC $BSYNCF "$c" "$p" "${THR[@]}"); [ -n "$l" ] && bsyn+="$l"$'\n'; fi
    l=$(bench $REDIS $REDISR "$c" "$p" "${SET[@]}"); [ -n "$l" ] && red+="$l"$'\n'
    l=$(bench $REDIS0 - "$c" "$p" "${SET[@]}"); [ -n "$l" ] && red0+="$l"$'\n'
  done
  line() { # server lines refused
    local n
    n=$(printf '%s' "$2" | grep -c . || true)
    printf '%-8s %-10s %12s %8s %8s %8s %7s %7s %9s %8s\n' "$label" "$1" $( ([ "$n" -gt 0 ] && printf '%s' "$2" | medians) || echo "- - - - - -") "$3" $((ROUNDS - n))
  }
  line off "$off" -
  [ -n "$BASE_BIN" ] && line off@base "$boff" -
  line async "$asy" $(($(refused $ASYNC) - r0a))
  [ -n "$BASE_BIN" ] && line async@base "$basy" $(($(refused $BASYNC) - r0ba))
  [ -n "$BEFORE" ] && line "async@$BEFORE" "$bef" $(($(refused $BEF) - r0b))
  line sync "$syn" $(($(refused $SYNC) - r0s))
  [ -n "$BASE_BIN" ] && line sync@base "$bsyn" $(($(refused $BSYNC) - r0bs))
  line redis+rep "$red" -
  line redis "$red0" -
  return 0
}
for r in $ROWS; do
  case $r in
  P1) row P1 50 1 ;;
  P16) row P16 50 16 ;;
  esac
done
echo "async leader: $(lagline $ASYNC)"
echo "sync leader:  $(lagline $SYNC)"
[ -n "$BASE_BIN" ] && echo "async@base:   $(lagline $BASYNC)" && echo "sync@base:    $(lagline $BSYNC)"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
