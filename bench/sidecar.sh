#!/usr/bin/env bash
# Sidecar mode's cost: a three-node celld cluster (memory-only), one
# sidecar (--upstream), and redis-benchmark in alternation (A B A B ...):
#   direct   redis-benchmark --cluster straight to the owners (a
#            cluster-aware client: each key sent to its owner)
#   sidecar  a plain redis-benchmark against the sidecar, which forwards
# at pipeline 1 and 16, 16 connections, random keys. Prints the median
# req/s, p50 and p99 (ms) of each side and the ratio sidecar/direct, each
# side's range over the rounds, the per-round ratios, CPU µs per request
# of every process, the owners' busy polls per 1000 requests and their
# events per event-loop wake (INFO stats loop_events / loop_wakes), and the
# sidecar's read+write system calls per request.
#
# Rounds alternate A B B A A B ... (ABBA: a drift in the machine's load
# weighs on both sides alike), ROUNDS per side (default 5).
#
# The direct side is bimodal at P16 (session 10, quiet: 264k or 394k
# req/s between identical rounds; session 11 at load 34-39: 155-158k or
# 190-193k, 8 rounds). What is known: the slow rounds cost the owners more
# CPU per request (3.95-4.70 us against 3.20-3.40 us in the fast ones, same
# run), so it is not only time spent descheduled; the owners' busy polls
# (5.7-14.5 per 1000 requests on the direct side, ~0 through the sidecar,
# whose batches keep the owners below the 0.5 busy share of
# server/busypoll.go) do not separate the two modes. Not yet settled:
# whether an owner's event loop (one: --io-loops 1) settles, for a whole
# round, into serving few connections per wake (more epoll waits and
# wake-ups per request) or many. The events-per-wake column counts that
# now (INFO stats loop_events / loop_wakes): at load 20-25 (session 12) the
# direct rounds of 38k-264k req/s all served 3.7-4.6 events per wake, no
# split; a quiet run must tell. Also seen in session 12's quiet run (load
# 0.5, direct 397-399k req/s in all three rounds): redis-benchmark
# --cluster itself used 2.55-2.85 us per request there, a whole core, so
# the fast mode is bounded by the benchmark's one thread, and a slow round
# may be one where it shares its core with an owner.
# Read the CPU columns, which are stable, and the ranges; OWNER_FLAGS=
# "--busy-poll 0" runs both sides without busy-polling.
#
#   bash bench/sidecar.sh
#   ROUNDS=7 N=300000 bash bench/sidecar.sh
#   OWNER_FLAGS="--busy-poll 0" bash bench/sidecar.sh
#   HOGS=2 PIPELINES=16 bash bench/sidecar.sh
#
# HOGS=K runs K busy loops (shell `while :; do :; done`) beside the whole
# run: CPU contention made repeatable. Two of them (session 14) leave the
# direct side at its quiet req/s and halve the sidecar's: its round trips
# wait for two more wake-ups and for the slowest of three owners
# (docs/sidecar.md, "Session 14").
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
for tool in redis-benchmark redis-cli go; do
  command -v "$tool" >/dev/null || { echo "missing $tool (apt-get install redis-tools)" >&2; exit 1; }
done
N=${N:-200000}
ROUNDS=${ROUNDS:-5}
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
sysrw() { awk '$1 == "syscr:" || $1 == "syscw:" { t += $2 } END { print t + 0 }' "/proc/$1/io"; } # read + write system calls so far
us_per() { awk -v a="$1" -v b="$2" -v hz="$hz" -v n="$N" 'BEGIN { printf "%.2f", (b - a) / hz * 1e6 / n }'; }
for p in $BASE $((BASE + 1)) $((BASE + 2)) $side; do
  for _ in $(seq 100); do redis-cli -p "$p" ping >/dev/null 2>&1 && break; sleep 0.1; done
done
for _ in $(seq "${HOGS:-0}"); do
  bash -c 'while :; do :; done' &
  pids+=($!)
done

# polls: the owners' busy polls, loop wakes and events so far (INFO stats
# busy_polls, loop_wakes, loop_events, summed; 0 from a build without them).
polls() {
  local t=0 w=0 e=0 p a b c
  for p in $BASE $((BASE + 1)) $((BASE + 2)); do
    read -r a b c < <(redis-cli -p "$p" info stats | tr -d '\r' | awk -F: '
      $1 == "busy_polls" { a = $2 } $1 == "loop_wakes" { b = $2 } $1 == "loop_events" { c = $2 }
      END { print a + 0, b + 0, c + 0 }')
    t=$((t + a)) w=$((w + b)) e=$((e + c))
  done
  echo "$t $w $e"
}

# run direct|sidecar pipeline -> "rps p50 p99 bench owners sidecar polls epw sys":
# bench, owners and sidecar are CPU µs per request (utime+stime over the
# run, from /proc for the servers, from time(1) for redis-benchmark):
# robust to a busy machine, unlike req/s; polls is the owners' busy polls
# per 1000 requests; epw the owners' events per loop wake (connections
# served per wake; "-" from a build that does not count them); sys the
# sidecar's read and write system calls per request (/proc/PID/io syscr +
# syscw: every read(2) and write(2) of its sockets; epoll waits are not
# counted).
run() {
  local args=(-c "$CONNS" -n "$N" -P "$2" -r "$KEYS")
  local out o0 s0 bcpu p0 y0
  o0=$(ticks "${opids[@]}"); s0=$(ticks "$spid"); p0=$(polls); y0=$(sysrw "$spid")
  if [ "$1" = direct ]; then
    out=$(/usr/bin/time -f "benchcpu %U %S" redis-benchmark --cluster -h 127.0.0.1 -p "$BASE" "${args[@]}" CL.THROTTLE "k{tag}__rand_int__" 100 1000 60 2>&1)
  else
    out=$(/usr/bin/time -f "benchcpu %U %S" redis-benchmark -h 127.0.0.1 -p "$side" "${args[@]}" CL.THROTTLE "k__rand_int__" 100 1000 60 2>&1)
  fi
  bcpu=$(echo "$out" | awk -v n="$N" '/^benchcpu/ { printf "%.2f", ($2 + $3) * 1e6 / n }')
  local o s pl sy
  o=$(us_per "$o0" "$(ticks "${opids[@]}")"); s=$(us_per "$s0" "$(ticks "$spid")")
  sy=$(awk -v a="$y0" -v b="$(sysrw "$spid")" -v n="$N" 'BEGIN { printf "%.3f", (b - a) / n }')
  pl=$(awk -v a="$p0" -v b="$(polls)" -v n="$N" -v sy="$sy" 'BEGIN { split(a, x, " "); split(b, y, " ")
    printf "%.1f ", (y[1] - x[1]) * 1000 / n
    if (y[2] > x[2]) printf "%.2f", (y[3] - x[3]) / (y[2] - x[2]); else printf "-"
    printf " %s", sy }')
  echo "$out" | awk -v b="$bcpu" -v o="$o" -v s="$s" -v pl="$pl" \
    '/throughput summary/ { rps = $3 } /avg +min +p50/ { getline; p50 = $3; p99 = $5 } END { print rps, p50, p99, b, o, s, pl }'
}

# span: lines of numbers on stdin -> "min-max" of column $1.
span() { awk -v c="$1" 'NR == 1 || $c < lo { lo = $c } NR == 1 || $c > hi { hi = $c } END { printf "%.0f-%.0f", lo, hi }'; }

echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg); owner flags: ${OWNER_FLAGS:-(none)}; sidecar flags: ${SIDECAR_FLAGS:-(none)}; busy loops beside: ${HOGS:-0}"
printf "%-4s %12s %8s %8s   %12s %8s %8s   %6s\n" P direct p50 p99 sidecar p50 p99 ratio
for P in ${PIPELINES:-1 16}; do
  : >"$work/d" ; : >"$work/s"
  for r in $(seq "$ROUNDS"); do # ABBA: d s, s d, d s, ...
    if [ $((r % 2)) = 1 ]; then
      run direct "$P" >>"$work/d"; run sidecar "$P" >>"$work/s"
    else
      run sidecar "$P" >>"$work/s"; run direct "$P" >>"$work/d"
    fi
  done
  read -r drps dp50 dp99 _ < <(medians <"$work/d")
  read -r srps sp50 sp99 _ < <(medians <"$work/s")
  printf "%-4s %12.0f %8s %8s   %12.0f %8s %8s   %6.2f\n" "$P" "$drps" "$dp50" "$dp99" "$srps" "$sp50" "$sp99" \
    "$(awk -v a="$srps" -v b="$drps" 'BEGIN { print a / b }')"
  echo "  req/s ranges: direct $(span 1 <"$work/d"), sidecar $(span 1 <"$work/s"); per-round ratios (round i's sidecar / direct): $(paste -d' ' "$work/s" "$work/d" | awk '{ printf "%.2f ", $1 / $10 }')"
  echo "  rounds (rps p50 p99 cpu:bench owners sidecar, owner busy polls/1000, owner events/wake, sidecar read+write syscalls/request) direct: $(tr '\n' ';' <"$work/d")"
  echo "                                                               sidecar: $(tr '\n' ';' <"$work/s")"
  read -r _ _ _ d_b d_o d_s d_p d_e _ < <(medians <"$work/d")
  read -r _ _ _ s_b s_o s_s s_p s_e s_y < <(medians <"$work/s")
  echo "  CPU us/request, medians: direct bench $d_b + owners $d_o (+ idle sidecar $d_s); via sidecar bench $s_b + owners $s_o + sidecar $s_s"
  echo "  owner busy polls per 1000 requests, medians: direct $d_p, via sidecar $s_p"
  echo "  owner events per loop wake, medians: direct $d_e, via sidecar $s_e; sidecar read+write syscalls per request, median: $s_y"
  echo "  load average now: $(cut -d' ' -f1-3 /proc/loadavg)"
done
