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
if [ -n "${CELLD_BIN:-}" ]; then cp "$CELLD_BIN" "$work/celld"; else go build -o "$work/celld" .; fi
nodes="127.0.0.1:$BASE,127.0.0.1:$((BASE + 1)),127.0.0.1:$((BASE + 2))"
for i in 0 1 2; do
  "$work/celld" --addr "127.0.0.1:$((BASE + i))" --cluster-nodes "$nodes" --persist no ${OWNER_FLAGS:-} 2>"$work/n$i.log" &
  pids+=($!)
done
side=$((BASE + 10))
"$work/celld" --addr "127.0.0.1:$side" --upstream "127.0.0.1:$BASE" --persist no ${SIDECAR_FLAGS:-} 2>"$work/s.log" &
spid=$!
pids+=($spid)
opids=("${pids[@]:0:3}")
ticks() { local t=0 p; for p in "$@"; do t=$((t + $(awk '{ print $14 + $15 }' "/proc/$p/stat"))); done; echo "$t"; } # utime+stime, clock ticks
hz=$(getconf CLK_TCK)
us_per() { awk -v a="$1" -v b="$2" -v hz="$hz" -v n="$N" 'BEGIN { printf "%.2f", (b - a) / hz * 1e6 / n }'; }
for p in $BASE $((BASE + 1)) $((BASE + 2)) $side; do
  for _ in $(seq 100); do redis-cli -p "$p" ping >/dev/null 2>&1 && break; sleep 0.1; done
done

# run direct|sidecar pipeline -> "rps p50 p99 bench owners sidecar": the
# last three are CPU µs per request (utime+stime over the run, from /proc
# for the servers, from time(1) for redis-benchmark): robust to a busy
# machine, unlike req/s.
run() {
  local args=(-c "$CONNS" -n "$N" -P "$2" -r "$KEYS")
  local out o0 s0 bcpu
  o0=$(ticks "${opids[@]}"); s0=$(ticks "$spid")
  if [ "$1" = direct ]; then
    out=$(/usr/bin/time -f "benchcpu %U %S" redis-benchmark --cluster -h 127.0.0.1 -p "$BASE" "${args[@]}" CL.THROTTLE "k{tag}__rand_int__" 100 1000 60 2>&1)
  else
    out=$(/usr/bin/time -f "benchcpu %U %S" redis-benchmark -h 127.0.0.1 -p "$side" "${args[@]}" CL.THROTTLE "k__rand_int__" 100 1000 60 2>&1)
  fi
  bcpu=$(echo "$out" | awk -v n="$N" '/^benchcpu/ { printf "%.2f", ($2 + $3) * 1e6 / n }')
  echo "$out" | awk -v b="$bcpu" -v o="$(us_per "$o0" "$(ticks "${opids[@]}")")" -v s="$(us_per "$s0" "$(ticks "$spid")")" \
    '/throughput summary/ { rps = $3 } /avg +min +p50/ { getline; p50 = $3; p99 = $5 } END { print rps, p50, p99, b, o, s }'
}

echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
printf "%-4s %12s %8s %8s   %12s %8s %8s   %6s\n" P direct p50 p99 sidecar p50 p99 ratio
for P in ${PIPELINES:-1 16}; do
  : >"$work/d" ; : >"$work/s"
  for _ in $(seq "$ROUNDS"); do
    run direct "$P" >>"$work/d"
    run sidecar "$P" >>"$work/s"
  done
  read -r drps dp50 dp99 _ < <(medians <"$work/d")
  read -r srps sp50 sp99 _ < <(medians <"$work/s")
  printf "%-4s %12.0f %8s %8s   %12.0f %8s %8s   %6.2f\n" "$P" "$drps" "$dp50" "$dp99" "$srps" "$sp50" "$sp99" \
    "$(awk -v a="$srps" -v b="$drps" 'BEGIN { print a / b }')"
  echo "  rounds (rps p50 p99 cpu:bench owners sidecar) direct: $(tr '\n' ';' <"$work/d")"
  echo "                                             sidecar: $(tr '\n' ';' <"$work/s")"
  read -r _ _ _ d_b d_o d_s < <(medians <"$work/d")
  read -r _ _ _ s_b s_o s_s < <(medians <"$work/s")
  echo "  CPU us/request, medians: direct bench $d_b + owners $d_o (+ idle sidecar $d_s); via sidecar bench $s_b + owners $s_o + sidecar $s_s"
  echo "  load average now: $(cut -d' ' -f1-3 /proc/loadavg)"
done
