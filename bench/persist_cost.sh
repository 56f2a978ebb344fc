#!/usr/bin/env bash
# Throughput cost of persistence: redis-benchmark CL.THROTTLE against two
# celld processes from the same build, one with --persist=false and one with
# the defaults (--persist=true, --flush-interval=100ms), measured in
# alternation (off on off on ...) so both see the same machine load. Prints
# each run, the median req/s of each side and the ratio on/off for every
# row. The issue's target: persistence costs under 10% (ratio ≥ 0.90).
# Needs redis-benchmark and redis-cli on PATH (Debian: apt-get install
# redis-tools) and Go to build celld.
#
#   bash bench/persist_cost.sh                 # 5 rounds × 3 rows of 1.5M requests, ~6 minutes
#                                              # (runs under ~1 s swing ±10% on a shared VM)
#   ROUNDS=3 N=200000 bash bench/persist_cost.sh
#   CELLD_BIN=/tmp/celld-old bash bench/persist_cost.sh   # another build
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh

for tool in redis-benchmark redis-cli go; do
  command -v "$tool" >/dev/null || { echo "missing $tool (apt-get install redis-tools)" >&2; exit 1; }
done

N=${N:-1500000}
KEYS=${KEYS:-100000}
ROUNDS=${ROUNDS:-5}
OFF_PORT=${OFF_PORT:-17391}
ON_PORT=${ON_PORT:-17392}
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
"$work/celld" --addr 127.0.0.1:$ON_PORT --dir "$work/data" 2>"$work/on.log" & pids+=($!)
for p in $OFF_PORT $ON_PORT; do
  for _ in $(seq 100); do redis-cli -p $p ping >/dev/null 2>&1 && break; sleep 0.1; done
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
  echo "$r $(echo "($t1 - $t0) * 1000000 / $hz / $N" | bc -l | xargs printf '%.2f')"
}


printf '%-36s %12s %12s %7s %8s %8s %7s   req/s runs (off/on)\n' "row" "off req/s" "on req/s" "on/off" "off cpu" "on cpu" "on/off"
row() { # label clients pipeline command...
  local label=$1 c=$2 p=$3; shift 3
  local offs=() ons=()
  for _ in $(seq "$ROUNDS"); do
    offs+=("$(rps $OFF_PORT "$c" "$p" "$@")")
    ons+=("$(rps $ON_PORT "$c" "$p" "$@")")
  done
  local moff mon coff con
  read -r moff coff <<<"$(printf '%s\n' "${offs[@]}" | medians)"
  read -r mon con <<<"$(printf '%s\n' "${ons[@]}" | medians)"
  printf '%-36s %12.0f %12.0f %7.3f %8.2f %8.2f %7.3f   %s / %s\n' "$label" "$moff" "$mon" \
    "$(echo "$mon / $moff" | bc -l)" "$coff" "$con" "$(echo "$con / $coff" | bc -l)" \
    "$(printf '%s\n' "${offs[@]}" | awk '{printf "%s ", $1}')" "$(printf '%s\n' "${ons[@]}" | awk '{printf "%s ", $1}')"
}

row "CL.THROTTLE random key c=50 P=16" 50 16 CL.THROTTLE key:__rand_int__ 15 30 60
# Every call allowed (a limit no key reaches, keys that stay): every call
# writes its key, the most persistence can cost.
row "CL.THROTTLE allowed c=50 P=16"    50 16 CL.THROTTLE ok:__rand_int__ 1000000 1 1
row "CL.THROTTLE random key c=50 P=1"  50 1  CL.THROTTLE key:__rand_int__ 15 30 60
row "CL.THROTTLE hot key c=50 P=16"    50 16 CL.THROTTLE hot 15 30 60

echo
echo "persisting side: $(redis-cli -p $ON_PORT info persistence | tr -d '\r' | grep -E '^(flushes|flush_errors|last_flush_keys|last_flush_duration_us):' | tr '\n' ' ')"
