#!/usr/bin/env bash
# CL.WINDOW against CL.THROTTLE, side by side on one celld, measured with
# redis-benchmark in alternation (THROTTLE, X, THROTTLE, X, ...), as
# bench/family.sh does; then the bytes a LOG key costs against the
# sorted-set pattern's in redis-server (MEMORY USAGE).
#
# Goals (docs/cl-window.md): at c=50 P=16, CL.WINDOW LOG with limit 100 at
# least 0.8x CL.THROTTLE's throughput; FIXED and SLIDING at least 1.0x.
# Every CL.THROTTLE call writes (a limit no key reaches), and so do the
# window rows over 100,000 keys (each key sees a call or two per second,
# under its limit of 100 per second); the "LOG full" row is 1,000 hot keys
# whose logs hold 100 entries, almost every call denied after scanning them.
#
# Each row prints the medians over ROUNDS alternating pairs (req/s, p50,
# p99, celld's CPU µs per call) and the ratios of the medians, with the
# spread of the per-round throughput ratios. Needs redis-benchmark,
# redis-cli and Go; the memory part needs redis-server too.
#
#   bash bench/window.sh                       # ~5 minutes
#   N=100000 ROUNDS=3 bash bench/window.sh     # quick look
#   PART=memory bash bench/window.sh           # only the bytes per key
#   PART=throughput PIPES=16 bash bench/window.sh  # only the P=16 rows
#   CELLD_FLAGS="--busy-poll 0" bash bench/window.sh
#   CELLD_BIN=/tmp/celld-old bash bench/window.sh  # a prebuilt binary
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh

PART=${PART:-all}
N=${N:-300000}
ROUNDS=${ROUNDS:-5}
KEYS=${KEYS:-100000}
HOT=${HOT:-1000}
CPORT=${CPORT:-$((20000 + RANDOM % 12000))}
RPORT=${RPORT:-$((CPORT + 1))}
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT

for tool in redis-benchmark redis-cli go; do
  command -v "$tool" >/dev/null || { echo "missing $tool (apt-get install redis-tools)" >&2; exit 1; }
done

if [ -n "${CELLD_BIN:-}" ]; then cp "$CELLD_BIN" "$work/celld"; else go build -o "$work/celld" .; fi
# shellcheck disable=SC2086
"$work/celld" --addr 127.0.0.1:$CPORT --dir "$work/data" ${CELLD_FLAGS:-} 2>"$work/celld.log" &
for _ in $(seq 50); do redis-cli -p $CPORT ping >/dev/null 2>&1 && break; sleep 0.1; done
redis-cli -p $CPORT ping 2>/dev/null | grep -q PONG ||
  { echo "no celld answering on port $CPORT (see $work/celld.log)" >&2; tail -3 "$work/celld.log" >&2; exit 1; }
cpid=$(pgrep -f "$work/celld" | head -1)
hz=$(getconf CLK_TCK)
cpu() { awk '{ print $14 + $15 }' "/proc/$cpid/stat"; }

# bench C P R ARGS... -> "rps p50 p99 cpu_us_per_call" (R: keyspace size)
bench() {
  local c=$1 p=$2 r=$3; shift 3
  local t0 t1 out
  t0=$(cpu)
  out=$(redis-benchmark -p "$CPORT" -c "$c" -P "$p" -n "$N" -r "$r" --csv "$@" 2>/dev/null |
    awk -F, 'NR==2 { gsub(/"/, ""); print $2, $5, $7 }')
  t1=$(cpu)
  echo "$out $(echo "($t1 - $t0) * 1000000 / $hz / $N" | bc -l | xargs printf '%.2f')"
}

# Every row's keys are 15 bytes ("ok:" or "w?:" and redis-benchmark's 12
# digits), as CL.THROTTLE's: the store keeps keys up to 16 bytes inside
# their entry and longer ones in an arena (one more cache line to compare,
# arena garbage when a key expires), so a longer prefix would measure key
# length, not the command.
base=(CL.THROTTLE ok:__rand_int__ 1000000 1 1)
# The "live" rows (LIVE=1) compare calls that always find their key: the
# rows above recreate about half their keys (FIXED's all expire at their
# window's end, a GCRA key lives while its TAT is ahead), so their ratio
# mixes per-call cost with each mode's key churn. 1 per hour and a 1-hour
# window of 1e6 keep every key alive through the run.
livebase=(CL.THROTTLE ol:__rand_int__ 1000000 1 3600)
prefix() { case $1 in LOG) echo wl ;; FIXED) echo wf ;; SLIDING) echo ws ;; esac; }
row() { # label c p r args... (against "${base[@]}", or "${livebase[@]}" when $against is live)
  local label=$1 c=$2 p=$3 r=$4; shift 4
  local as="" bs="" rs=""
  local -a b_args=("${base[@]}")
  [ "${against:-}" = live ] && b_args=("${livebase[@]}")
  for _ in $(seq "$ROUNDS"); do
    local b a
    b=$(bench "$c" "$p" "$KEYS" "${b_args[@]}")
    a=$(bench "$c" "$p" "$r" "$@")
    bs+="$b"$'\n'
    as+="$a"$'\n'
    rs+="$(echo "${a%% *} / ${b%% *}" | bc -l)"$'\n'
  done
  local am bm
  am=$(printf '%s' "$as" | medians)
  bm=$(printf '%s' "$bs" | medians)
  read -r ar a50 a99 ac <<<"$am"
  read -r br b50 b99 bc <<<"$bm"
  local lo hi
  lo=$(printf '%s' "$rs" | sort -g | head -1)
  hi=$(printf '%s' "$rs" | sort -g | tail -1)
  printf '%-24s %10s %6s %7s %6s | %10s %6s %7s %6s | %6.2f %5.2f-%5.2f %9.2f\n' \
    "$label" "$ar" "$a50" "$a99" "$ac" "$br" "$b50" "$b99" "$bc" "$(echo "$ar / $br" | bc -l)" "$lo" "$hi" \
    "$(echo "$ac / $bc" | bc -l)"
}

if [ "$PART" = all ] || [ "$PART" = throughput ]; then
  # Warm every key set, so no row measures a growing store.
  redis-benchmark -p $CPORT -c 50 -P 16 -n $((KEYS * 3)) -r "$KEYS" "${base[@]}" >/dev/null 2>&1
  if [ "${LIVE:-1}" = 1 ]; then
    redis-benchmark -p $CPORT -c 50 -P 16 -n $((KEYS * 3)) -r "$KEYS" "${livebase[@]}" >/dev/null 2>&1
    for m in FIXED SLIDING; do
      redis-benchmark -p $CPORT -c 50 -P 16 -n $((KEYS * 3)) -r "$KEYS" CL.WINDOW "l$(prefix $m | cut -c2):__rand_int__" 1000000 3600000 "$m" >/dev/null 2>&1
    done
  fi
  for m in LOG FIXED SLIDING; do
    redis-benchmark -p $CPORT -c 50 -P 16 -n $((KEYS * 3)) -r "$KEYS" CL.WINDOW "$(prefix $m):__rand_int__" 100 1000 "$m" >/dev/null 2>&1
  done
  redis-benchmark -p $CPORT -c 50 -P 16 -n $((HOT * 200)) -r "$HOT" CL.WINDOW ht:__rand_int__ 100 100000 >/dev/null 2>&1
  printf '%-24s %10s %6s %7s %6s | %10s %6s %7s %6s | %6s %11s %9s\n' \
    "row" "req/s" "p50" "p99" "cpu/c" "THROTTLE/s" "p50" "p99" "cpu/c" "ratio" "round range" "cpu ratio"
  for p in ${PIPES:-16 1}; do
    c=50
    row "LOG 100/1s c=$c P=$p" "$c" "$p" "$KEYS" CL.WINDOW wl:__rand_int__ 100 1000 LOG
    row "FIXED c=$c P=$p" "$c" "$p" "$KEYS" CL.WINDOW wf:__rand_int__ 100 1000 FIXED
    row "SLIDING c=$c P=$p" "$c" "$p" "$KEYS" CL.WINDOW ws:__rand_int__ 100 1000 SLIDING
    row "LOG full c=$c P=$p" "$c" "$p" "$HOT" CL.WINDOW ht:__rand_int__ 100 100000
    if [ "${LIVE:-1}" = 1 ]; then
      against=live row "FIXED live c=$c P=$p" "$c" "$p" "$KEYS" CL.WINDOW lf:__rand_int__ 1000000 3600000 FIXED
      against=live row "SLIDING live c=$c P=$p" "$c" "$p" "$KEYS" CL.WINDOW ls:__rand_int__ 1000000 3600000 SLIDING
    fi
  done
  echo "(p50/p99 in ms; cpu/c = celld CPU µs per call; ratio = row req/s / CL.THROTTLE req/s and"
  echo " cpu ratio = row cpu/c / CL.THROTTLE cpu/c, medians of $ROUNDS alternating rounds of $N requests."
  echo " Goals at P=16: LOG ratio >= 0.8, FIXED and SLIDING ratio >= 1; the live rows are against"
  echo " CL.THROTTLE on keys that never expire either, without key churn: LIVE=0 leaves them out)"
fi

if [ "$PART" = all ] || [ "$PART" = memory ]; then
  command -v redis-server >/dev/null || { echo "missing redis-server for the memory part" >&2; exit 1; }
  redis-server --port "$RPORT" --save '' --appendonly no --daemonize no >"$work/redis.log" 2>&1 &
  for _ in $(seq 50); do redis-cli -p $RPORT ping >/dev/null 2>&1 && break; sleep 0.1; done
  K=${MEMKEYS:-200}
  used() { redis-cli -p "$CPORT" info memory | awk -F: '/^used_memory:/ { print $2+0 }'; }
  echo
  echo "bytes per key holding n requests, one per ms ($K keys of 8-byte names; celld: used_memory"
  echo "delta / keys; redis-server 7: MEMORY USAGE of the sorted-set pattern's key, members \"<ms>-<seq>\")"
  printf '%8s %12s %16s %12s\n' "n" "celld LOG" "redis ZSET" "ratio"
  for n in 10 100 1000; do
    redis-cli -p $CPORT flushall >/dev/null
    redis-cli -p $RPORT flushall >/dev/null
    before=$(used)
    for i in $(seq "$n"); do
      # one call per key per round; each round is at least 1 ms later
      seq -f 'CL.WINDOW mem:%05g 1000000 3600000' "$K" | sed 's/$/\r/' | redis-cli -p $CPORT --pipe >/dev/null
      ms=$(date +%s%3N)
      seq -f "ZADD zmem:%05g $ms $ms-$i" "$K" | sed 's/$/\r/' | redis-cli -p $RPORT --pipe >/dev/null
    done
    after=$(used)
    c=$(( (after - before) / K ))
    r=0
    for k in 1 2 3; do
      r=$(( r + $(redis-cli -p $RPORT memory usage "zmem:0000$k" samples 0) ))
    done
    r=$(( r / 3 ))
    printf '%8s %12s %16s %12.2f\n' "$n" "$c" "$r" "$(echo "$c / $r" | bc -l)"
  done
fi
