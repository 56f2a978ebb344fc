#!/usr/bin/env bash
# Sidecar mode's cost: a three-node celld cluster (memory-only), one
# sidecar (--upstream), and redis-benchmark in alternation (A B A B ...):
#   direct   redis-benchmark --cluster straight to the owners (a
#            cluster-aware client: each key sent to its owner)
#   sidecar  a plain redis-benchmark against the sidecar, which forwards
# at pipeline 1 and 16, 16 connections, random keys. Prints the median
# req/s, p50 and p99 (ms) of each side and the ratio sidecar/direct.
#
#   bash bench/sidecar.sh
#   ROUNDS=5 N=300000 bash bench/sidecar.sh
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
for tool in redis-benchmark redis-cli go; do
  command -v "$tool" >/dev/null || { echo "missing $tool (apt-get install redis-tools)" >&2; exit 1; }
done
N=${N:-200000}
ROUNDS=${ROUNDS:-3}
KEYS=${KEYS:-100000}
CONNS=${CONNS:-16}
BASE=${BASE:-$((20000 + RANDOM % 12000))}
work=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"' EXIT
go build -o "$work/celld" .
nodes="127.0.0.1:$BASE,127.0.0.1:$((BASE + 1)),127.0.0.1:$((BASE + 2))"
for i in 0 1 2; do
  "$work/celld" --addr "127.0.0.1:$((BASE + i))" --cluster-nodes "$nodes" --persist no 2>"$work/n$i.log" &
  pids+=($!)
done
side=$((BASE + 10))
"$work/celld" --addr "127.0.0.1:$side" --upstream "127.0.0.1:$BASE" --persist no 2>"$work/s.log" &
spid=$!
pids+=($spid)
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$spid/stat"; } # utime+stime, clock ticks
for p in $BASE $((BASE + 1)) $((BASE + 2)) $side; do
  for _ in $(seq 100); do redis-cli -p "$p" ping >/dev/null 2>&1 && break; sleep 0.1; done
done

run() { # direct|sidecar pipeline -> "rps p50 p99"
  local args=(-c "$CONNS" -n "$N" -P "$2" -r "$KEYS")
  local out
  if [ "$1" = direct ]; then
    out=$(redis-benchmark --cluster -h 127.0.0.1 -p "$BASE" "${args[@]}" CL.THROTTLE "k{tag}__rand_int__" 100 1000 60 2>/dev/null)
  else
    local t0; t0=$(cpu_ticks)
    out=$(redis-benchmark -h 127.0.0.1 -p "$side" "${args[@]}" CL.THROTTLE "k__rand_int__" 100 1000 60 2>/dev/null)
    # The sidecar's own CPU per request (µs): robust to a busy machine.
    echo "sidecar_cpu_us_per_req $(awk -v a="$t0" -v b="$(cpu_ticks)" -v hz="$(getconf CLK_TCK)" -v n="$N" 'BEGIN { printf "%.2f", (b - a) / hz * 1e6 / n }')" >>"$work/cpu"
  fi
  echo "$out" | awk '/throughput summary/ { rps = $3 } /avg +min +p50/ { getline; p50 = $3; p99 = $5 } END { print rps, p50, p99 }'
}

printf "%-4s %12s %8s %8s   %12s %8s %8s   %6s\n" P direct p50 p99 sidecar p50 p99 ratio
for P in 1 16; do
  : >"$work/d" ; : >"$work/s"
  for _ in $(seq "$ROUNDS"); do
    run direct "$P" >>"$work/d"
    run sidecar "$P" >>"$work/s"
  done
  read -r drps dp50 dp99 < <(medians <"$work/d")
  read -r srps sp50 sp99 < <(medians <"$work/s")
  printf "%-4s %12.0f %8s %8s   %12.0f %8s %8s   %6.2f\n" "$P" "$drps" "$dp50" "$dp99" "$srps" "$sp50" "$sp99" \
    "$(awk -v a="$srps" -v b="$drps" 'BEGIN { print a / b }')"
  echo "  rounds direct: $(tr '\n' ';' <"$work/d")  sidecar: $(tr '\n' ';' <"$work/s")"
  echo "  sidecar CPU per request (us), median: $(awk '{ print $2 }' "$work/cpu" | medians)"; : >"$work/cpu"
done
