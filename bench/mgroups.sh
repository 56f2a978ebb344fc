#!/usr/bin/env bash
# CL.MTHROTTLE's cost as a function of its groups: celld CPU µs per call
# for CL.THROTTLE and CL.MTHROTTLE with n = 1, 2, 3, 4 and 6 groups, all
# drawn from the same 100k keys (period 60 s, a limit no key reaches),
# alternated within each round. A line fitted through the n rows gives the
# per-call part F and the per-group part K of a call (cost ≈ F + n·K), the
# figures behind #17's 1.6x goal: three groups stay under 1.6x one
# CL.THROTTLE only while K is small against F, which at P=16 (system calls
# shared by 16 calls) it is not. Needs redis-benchmark, redis-cli and Go.
#
#   bash bench/mgroups.sh                   # P=16, 3 rounds of 1M calls, ~3 minutes
#   P=1 N=200000 ROUNDS=2 bash bench/mgroups.sh
#   CELLD_BIN=/tmp/celld-old bash bench/mgroups.sh
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-1000000}
P=${P:-16}
ROUNDS=${ROUNDS:-3}
PERIOD=60
port=${CPORT:-$((20000 + RANDOM % 12000))}
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
for tool in redis-benchmark redis-cli go; do
  command -v "$tool" >/dev/null || { echo "missing $tool (apt-get install redis-tools)" >&2; exit 1; }
done
if [ -n "${CELLD_BIN:-}" ]; then cp "$CELLD_BIN" "$work/celld"; else go build -o "$work/celld" .; fi
# shellcheck disable=SC2086
"$work/celld" --addr 127.0.0.1:$port --dir "$work/data" ${CELLD_FLAGS:-} 2>"$work/celld.log" &
pid=$!
for _ in $(seq 50); do redis-cli -p $port ping >/dev/null 2>&1 && break; sleep 0.1; done
redis-cli -p $port ping 2>/dev/null | grep -q PONG || { echo "no celld on port $port" >&2; exit 1; }
hz=$(getconf CLK_TCK)
cpu() { awk '{ print $14 + $15 }' "/proc/$pid/stat"; }
# bench ARGS... -> "req/s cpu_us_per_call"
bench() {
  local t0 t1 out
  t0=$(cpu)
  out=$(redis-benchmark -p $port -c 50 -P "$P" -n "$N" -r 100000 --csv "$@" 2>/dev/null |
    awk -F, 'NR==2 { gsub(/"/, ""); print $2 }')
  t1=$(cpu)
  echo "$out $(echo "($t1 - $t0) * 1000000 / $hz / $N" | bc -l | xargs printf '%.3f')"
}
groups() { # n -> CL.MTHROTTLE with n groups
  local a=(CL.MTHROTTLE)
  for _ in $(seq "$1"); do a+=(ok:__rand_int__ 1000000 1 $PERIOD 1); done
  echo "${a[@]}"
}
redis-benchmark -p $port -c 50 -P 16 -n 300000 -r 100000 CL.THROTTLE ok:__rand_int__ 1000000 1 $PERIOD >/dev/null 2>&1
printf '%-6s %-12s %12s %8s\n' round row req/s cpu/c
for r in $(seq "$ROUNDS"); do
  read -r rps c <<<"$(bench CL.THROTTLE ok:__rand_int__ 1000000 1 $PERIOD)"
  printf '%-6s %-12s %12s %8s\n' "$r" THROTTLE "$rps" "$c"
  for n in 1 2 3 4 6; do
    # shellcheck disable=SC2046
    read -r rps c <<<"$(bench $(groups $n))"
    printf '%-6s %-12s %12s %8s\n' "$r" "MTHROTTLE x$n" "$rps" "$c"
  done
done
echo "(P=$P c=50, $N calls per run; cpu/c = celld CPU µs per call from /proc)"
