#!/usr/bin/env bash
# The GCRA family against CL.THROTTLE, side by side on one celld, measured
# with redis-benchmark in alternation (THROTTLE, X, THROTTLE, X, ...):
# CL.THROTTLE_RO and CL.PTHROTTLE should match CL.THROTTLE's throughput,
# and CL.MTHROTTLE with three groups should cost at most 1.6x one
# CL.THROTTLE per call (throughput ratio >= 0.625). Every call writes its
# keys (a limit no key reaches), so the rows compare equal work per group.
# The period is PERIOD seconds (default 60): each call moves a key's TAT,
# and so its TTL, PERIOD s ahead, so every row's keys stay live between
# hits. With a period of 1 s (this script before session 10) a key lived
# about 1 s after its last hit, so a row drawing from 100k keys at under
# ~100k calls/s per key set (CL.MTHROTTLE's three sets) found many keys
# expired and paid for deleting and re-creating them, while CL.THROTTLE's
# faster row did not: not equal work. PERIOD=1 measures that old shape.
# Needs redis-benchmark and redis-cli on PATH and Go to build celld.
#
# Each row prints the medians over ROUNDS alternating pairs (req/s, p50,
# p99, and celld's own CPU time per call, read from /proc before and after
# each run) and the ratios of the medians. On a shared machine throughput
# swings with the neighbours' load (the spread between rounds, min-max of the
# per-round throughput ratios, is printed: read the median); CPU per call
# moves much less, and its ratio is the per-call cost the goals speak of.
#
#   bash bench/family.sh                     # ~4 minutes
#   N=100000 ROUNDS=3 bash bench/family.sh   # quick look
#   CELLD_FLAGS="--busy-poll 0" bash bench/family.sh
#   CELLD_FLAGS="--busy-poll 0 --persist=false" bash bench/family.sh  # persistence's share
#   PERIOD=1 bash bench/family.sh            # the pre-session-10 shape (keys expire)
#   CPS=50:16 bash bench/family.sh           # the pipelined rows only
#   ROWS="MTHROTTLE" bash bench/family.sh    # rows whose label matches (grep -E)
#   CELLD_BIN=/tmp/celld-old bash bench/family.sh   # another build (before/after)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh

for tool in redis-benchmark redis-cli go; do
  command -v "$tool" >/dev/null || { echo "missing $tool (apt-get install redis-tools)" >&2; exit 1; }
done

N=${N:-300000}
PERIOD=${PERIOD:-60}
ROUNDS=${ROUNDS:-5}
KEYS=${KEYS:-100000}
CPORT=${CPORT:-$((20000 + RANDOM % 12000))}
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT

if [ -n "${CELLD_BIN:-}" ]; then cp "$CELLD_BIN" "$work/celld"; else go build -o "$work/celld" .; fi
# CELLD_FLAGS adds flags: "--busy-poll 0" keeps an idle-waiting event loop
# from spinning, so that cpu/c counts work only.
# shellcheck disable=SC2086
"$work/celld" --addr 127.0.0.1:$CPORT --dir "$work/data" ${CELLD_FLAGS:-} 2>"$work/celld.log" &
for _ in $(seq 50); do redis-cli -p $CPORT ping >/dev/null 2>&1 && break; sleep 0.1; done
redis-cli -p $CPORT ping 2>/dev/null | grep -q PONG ||
  { echo "no celld answering on port $CPORT (see $work/celld.log)" >&2; tail -3 "$work/celld.log" >&2; exit 1; }

cpid=$(pgrep -f "$work/celld" | head -1)
hz=$(getconf CLK_TCK)
cpu() { awk '{ print $14 + $15 }' "/proc/$cpid/stat"; } # celld's user+system ticks

# bench C P ARGS... -> "rps p50 p99 cpu_us_per_call"
bench() {
  local c=$1 p=$2; shift 2
  local t0 t1 out
  t0=$(cpu)
  out=$(redis-benchmark -p "$CPORT" -c "$c" -P "$p" -n "$N" -r "$KEYS" --csv "$@" 2>/dev/null |
    awk -F, 'NR==2 { gsub(/"/, ""); print $2, $5, $7 }')
  t1=$(cpu)
  echo "$out $(echo "($t1 - $t0) * 1000000 / $hz / $N" | bc -l | xargs printf '%.2f')"
}

# Warm every key set the rows use, so no row measures a growing store.
for prefix in ok a b c; do
  redis-benchmark -p $CPORT -c 50 -P 16 -n $((KEYS * 3)) -r "$KEYS" CL.THROTTLE $prefix:__rand_int__ 1000000 1 "$PERIOD" >/dev/null 2>&1
done

base=(CL.THROTTLE ok:__rand_int__ 1000000 1 "$PERIOD")
printf '%-26s %10s %6s %7s %6s | %10s %6s %7s %6s | %6s %11s %9s\n' \
  "row" "req/s" "p50" "p99" "cpu/c" "THROTTLE/s" "p50" "p99" "cpu/c" "ratio" "round range" "cpu ratio"
row() { # label c p args...
  local label=$1 c=$2 p=$3; shift 3
  [ -z "${ROWS:-}" ] || grep -qE -- "$ROWS" <<<"$label" || return 0
  local as="" bs="" rs=""
  for _ in $(seq "$ROUNDS"); do
    local b a
    b=$(bench "$c" "$p" "${base[@]}")
    a=$(bench "$c" "$p" "$@")
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
  printf '%-26s %10s %6s %7s %6s | %10s %6s %7s %6s | %6.2f %5.2f-%5.2f %9.2f\n' \
    "$label" "$ar" "$a50" "$a99" "$ac" "$br" "$b50" "$b99" "$bc" "$(echo "$ar / $br" | bc -l)" "$lo" "$hi" \
    "$(echo "$ac / $bc" | bc -l)"
}

# CPS: the client/pipeline pairs to run, as c:P words (default both).
for cp in ${CPS:-50:16 50:1}; do
  IFS=: read -r c p <<<"$cp"
  row "CL.THROTTLE_RO c=$c P=$p" "$c" "$p" CL.THROTTLE_RO ok:__rand_int__ 1000000 1 "$PERIOD"
  row "CL.PTHROTTLE c=$c P=$p" "$c" "$p" CL.PTHROTTLE ok:__rand_int__ 1000000 1 "${PERIOD}000"
  row "CL.MTHROTTLE x3 c=$c P=$p" "$c" "$p" CL.MTHROTTLE \
    a:__rand_int__ 1000000 1 "$PERIOD" 1 b:__rand_int__ 1000000 1 "$PERIOD" 1 c:__rand_int__ 1000000 1 "$PERIOD" 1
  # The same three groups drawn from CL.THROTTLE's own 100k keys: the row
  # above touches 300k distinct keys against CL.THROTTLE's 100k, so part
  # of its cost is a cache footprint three times as large; this row keeps
  # the key population equal and compares three updates with one.
  row "CL.MTHROTTLE x3 ok: c=$c P=$p" "$c" "$p" CL.MTHROTTLE \
    ok:__rand_int__ 1000000 1 "$PERIOD" 1 ok:__rand_int__ 1000000 1 "$PERIOD" 1 ok:__rand_int__ 1000000 1 "$PERIOD" 1
done
echo "(p50/p99 in ms; cpu/c = celld CPU µs per call; ratio = row req/s / CL.THROTTLE req/s and"
echo " cpu ratio = row cpu/c / CL.THROTTLE cpu/c, medians of $ROUNDS alternating rounds of $N requests."
echo " Goals: THROTTLE_RO and PTHROTTLE ratio >= 1 (cpu ratio <= 1); MTHROTTLE x3 ratio >= 0.625, cpu ratio <= 1.6)"
