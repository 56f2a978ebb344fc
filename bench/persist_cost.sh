#!/usr/bin/env bash
# Throughput cost of persistence: redis-benchmark CL.THROTTLE against two
# celld processes from the same build, one with --persist=false and one with
# the defaults (--persist=true, --flush-interval=100ms). The issue's target
# (#14): persistence costs under 5% in every row (on/off ratio ≥ 0.95).
# Needs redis-benchmark and redis-cli on PATH (Debian: apt-get install
# redis-tools) and Go to build celld.
#
# How a row is measured. Each round runs the row once against each side,
# back to back, and the order alternates from round to round (off on, on
# off, off on, ...: A B B A, so a drift in the machine's load does not
# favour one side). Each round gives two ratios, on/off of req/s and on/off
# of the server's CPU µs per call (utime+stime from /proc over the run
# divided by the calls). The row prints the median of each side's req/s and
# CPU per call, and the MEDIAN OF THE PER-ROUND RATIOS (not a ratio of
# medians: a round's two runs saw the same neighbours, two medians need
# not). CPU per call is the steadier figure on a shared machine: req/s also
# measures how much CPU redis-benchmark and the neighbours left the server.
# The per-round ratios are printed at the end of each row so the spread is
# visible: trust a row when its ratios agree, not just its median.
#
# Rounds and size. At N=1M a P16 run lasts ~1.5 s, and the persisting
# side's flusher and folds (one every few seconds on the allowed row) land
# in a run or not, so one round's ratio swings by ±5-8% even on a quiet
# machine. Five rounds at N=1M (ROWS=allowed: ~1 minute) put the median
# within about ±3%; the P1 row's runs last ~10 s each and swing less.
#
#   bash bench/persist_cost.sh                 # 5 rounds × 4 rows of 1M requests, ~4-5 minutes
#   ROUNDS=3 N=200000 bash bench/persist_cost.sh
#   ROWS="allowed hot" ROUNDS=7 bash bench/persist_cost.sh  # a subset: random allowed p1 hot
#   CELLD_BIN=/tmp/celld-old bash bench/persist_cost.sh   # another build
#   ON_ARGS="--log-fold-min-bytes 8388608" bash bench/persist_cost.sh  # flags for the persisting side
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh

for tool in redis-benchmark redis-cli go; do
  command -v "$tool" >/dev/null || { echo "missing $tool (apt-get install redis-tools)" >&2; exit 1; }
done

N=${N:-1000000}
KEYS=${KEYS:-100000}
ROUNDS=${ROUNDS:-5}
ROWS=${ROWS:-random allowed p1 hot}
OFF_PORT=${OFF_PORT:-$((20000 + RANDOM % 12000))}
ON_PORT=${ON_PORT:-$((OFF_PORT + 1))}
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  cat "$work/bench.err" 2>/dev/null | tail -5 >&2 || true
  rm -rf "$work"
}
trap cleanup EXIT

if [ -n "${CELLD_BIN:-}" ]; then cp "$CELLD_BIN" "$work/celld"; else go build -o "$work/celld" .; fi
"$work/celld" --addr 127.0.0.1:$OFF_PORT --persist=false 2>"$work/off.log" & pids+=($!)
# shellcheck disable=SC2086 # ON_ARGS is a list of flags
"$work/celld" --addr 127.0.0.1:$ON_PORT --dir "$work/data" ${ON_ARGS:-} 2>"$work/on.log" & pids+=($!)
for p in $OFF_PORT $ON_PORT; do
  for _ in $(seq 100); do redis-cli -p $p ping >/dev/null 2>&1 && break; sleep 0.1; done
  redis-cli -p $p ping 2>/dev/null | grep -q PONG ||
    { echo "no server answering on port $p (taken? see $work/*.log)" >&2; tail -3 "$work"/*.log >&2; exit 1; }
done

hz=$(getconf CLK_TCK)
cpu() { awk '{ print $14 + $15 }' "/proc/$1/stat"; } # a server's user+system ticks

# rps PORT CLIENTS PIPELINE ARGS... -> "req/s cpu_us_per_call" (the server's
# CPU over the run / calls: steadier than req/s on a loaded machine)
rps() {
  local port=$1 c=$2 p=$3; shift 3
  local pid=${pids[0]} t0 t1 r
  [ "$port" = "$ON_PORT" ] && pid=${pids[1]}
  t0=$(cpu "$pid")
  r=$(redis-benchmark -p "$port" -c "$c" -P "$p" -n "$N" -r "$KEYS" --csv "$@" 2>"$work/bench.err" |
    awk -F'","' 'NR==2 { v = $2; gsub(/"/, "", v); print v }')
  t1=$(cpu "$pid")
  echo "$r $(echo "($t1 - $t0) * 1000000 / $hz / $N" | bc -l | xargs printf '%.3f')"
}

printf '%-36s %12s %12s %7s %8s %8s %7s   per-round on/off: req/s | cpu\n' "row" "off req/s" "on req/s" "on/off" "off cpu" "on cpu" "on/off"
row() { # label clients pipeline command...
  local label=$1 c=$2 p=$3; shift 3
  local offs=() ons=() ratios=() i off on
  for i in $(seq "$ROUNDS"); do
    if [ $((i % 2)) = 1 ]; then
      off=$(rps $OFF_PORT "$c" "$p" "$@"); on=$(rps $ON_PORT "$c" "$p" "$@")
    else
      on=$(rps $ON_PORT "$c" "$p" "$@"); off=$(rps $OFF_PORT "$c" "$p" "$@")
    fi
    offs+=("$off") ons+=("$on")
    # "req/s ratio, cpu ratio" of this round
    ratios+=("$(echo "$off $on" | awk '{ printf "%.3f %.3f", $3 / $1, ($2 > 0 ? $4 / $2 : 0) }')")
  done
  local moff mon coff con rr rc
  read -r moff coff <<<"$(printf '%s\n' "${offs[@]}" | medians)"
  read -r mon con <<<"$(printf '%s\n' "${ons[@]}" | medians)"
  read -r rr rc <<<"$(printf '%s\n' "${ratios[@]}" | medians)"
  printf '%-36s %12.0f %12.0f %7.3f %8.3f %8.3f %7.3f   %s| %s\n' "$label" "$moff" "$mon" \
    "$rr" "$coff" "$con" "$rc" \
    "$(printf '%s\n' "${ratios[@]}" | awk '{printf "%s ", $1}')" "$(printf '%s\n' "${ratios[@]}" | awk '{printf "%s ", $2}')"
}

for r in $ROWS; do
  case $r in
  random) row "CL.THROTTLE random key c=50 P=16" 50 16 CL.THROTTLE key:__rand_int__ 15 30 60 ;;
  # Every call allowed (a limit no key reaches, keys that stay): every
  # call writes its key, the most persistence can cost.
  allowed) row "CL.THROTTLE allowed c=50 P=16" 50 16 CL.THROTTLE ok:__rand_int__ 1000000 1 1 ;;
  p1) row "CL.THROTTLE random key c=50 P=1" 50 1 CL.THROTTLE key:__rand_int__ 15 30 60 ;;
  hot) row "CL.THROTTLE hot key c=50 P=16" 50 16 CL.THROTTLE hot 15 30 60 ;;
  *) echo "unknown row $r (random allowed p1 hot)" >&2; exit 1 ;;
  esac
done

echo
echo "persisting side: $(redis-cli -p $ON_PORT info persistence | tr -d '\r' | grep -E '^(flushes|flush_errors|last_flush_keys|last_flush_duration_us|bases|last_base_duration_ms):' | tr '\n' ' ')"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
