#!/usr/bin/env bash
# Before/after: two builds of celld (two git revisions) side by side, each
# with its defaults (persistence on), measured with redis-benchmark in
# alternation (A B A B ...) so both see the same machine. Prints the median
# req/s and p99 of each side per row and the ratio B/A. Use it for any
# change to the hot path, beside bench/run.sh (which compares with Redis).
#
#   bash bench/ab.sh REV_A [REV_B]     # REV_B defaults to the work tree
#   ROUNDS=5 N=300000 bash bench/ab.sh main
#
# A_FLAGS and B_FLAGS add celld flags to one side; "." as a revision is the
# work tree. So one build against itself with and without a memory bound:
#
#   B_FLAGS="--maxmemory 1gb --maxmemory-policy volatile-ttl" bash bench/ab.sh . .
#
# Besides req/s, each side's CPU time per call (utime+stime from
# /proc/<pid>/stat over the row's runs / calls, median of the rounds) is
# printed: on a loaded machine it is steadier than throughput.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh

for tool in redis-benchmark redis-cli go git; do
  command -v "$tool" >/dev/null || { echo "missing $tool (apt-get install redis-tools)" >&2; exit 1; }
done
[ $# -ge 1 ] || { echo "usage: bench/ab.sh REV_A [REV_B]" >&2; exit 2; }

N=${N:-300000}
ROUNDS=${ROUNDS:-5}
KEYS=${KEYS:-100000}
APORT=${APORT:-$((20000 + RANDOM % 12000))}
BPORT=${BPORT:-$((APORT + 1))}
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; git worktree remove --force "$work/a" >/dev/null 2>&1; git worktree remove --force "$work/b" >/dev/null 2>&1; rm -rf "$work"' EXIT

build() { # rev dest
  if [ -z "$1" ] || [ "$1" = . ]; then go build -o "$2" .; return; fi
  git worktree add -q --detach "$work/src-$(basename "$2")" "$1"
  (cd "$work/src-$(basename "$2")" && go build -o "$2" .)
  git worktree remove --force "$work/src-$(basename "$2")"
}
build "$1" "$work/celld-a"
build "${2:-}" "$work/celld-b"
"$work/celld-a" --addr 127.0.0.1:$APORT --dir "$work/data-a" ${A_FLAGS:-} 2>"$work/a.log" &
apid=$!
"$work/celld-b" --addr 127.0.0.1:$BPORT --dir "$work/data-b" ${B_FLAGS:-} 2>"$work/b.log" &
bpid=$!
for p in $APORT $BPORT; do
  for _ in $(seq 50); do redis-cli -p $p ping >/dev/null 2>&1 && break; sleep 0.1; done
  redis-cli -p $p ping 2>/dev/null | grep -q PONG || { echo "no server on port $p" >&2; tail -3 "$work"/*.log >&2; exit 1; }
done

cputicks() { awk '{ sub(/.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"; } # utime+stime of a pid
bench() { # port pid c p args... -> "rps p99 cpu-us-per-call"
  local port=$1 pid=$2 c=$3 p=$4; shift 4
  local t0 t1 hz
  hz=$(getconf CLK_TCK)
  t0=$(cputicks "$pid")
  redis-benchmark -p "$port" -c "$c" -P "$p" -n "$N" -r "$KEYS" --csv "$@" 2>/dev/null |
    awk -F, 'NR==2 { gsub(/"/, ""); printf "%s %s ", $2, $7 }'
  t1=$(cputicks "$pid")
  echo "($t1 - $t0) * 1000000 / $hz / $N" | bc -l
}
for p in $APORT $BPORT; do
  redis-benchmark -p $p -c 50 -P 16 -n $((KEYS * 3)) -r "$KEYS" CL.THROTTLE key:__rand_int__ 15 30 60 >/dev/null 2>&1
  redis-benchmark -p $p -c 50 -P 16 -n $((KEYS * 3)) -r "$KEYS" CL.THROTTLE ok:__rand_int__ 1000000 1 1 >/dev/null 2>&1
done

printf '%-36s %12s %8s %7s | %12s %8s %7s | %6s %6s %6s\n' "row (A=${1} B=${2:-worktree})" "A req/s" "A p99" "A cpu" "B req/s" "B p99" "B cpu" "B/A" "p99 B/A" "cpu B/A"
row() { # label c p args...
  local label=$1 c=$2 p=$3; shift 3
  local as="" bs=""
  for _ in $(seq "$ROUNDS"); do
    as+="$(bench $APORT $apid "$c" "$p" "$@")"$'\n'
    bs+="$(bench $BPORT $bpid "$c" "$p" "$@")"$'\n'
  done
  local ar a99 acpu br b99 bcpu
  read -r ar a99 acpu <<<"$(printf '%s' "$as" | medians)"
  read -r br b99 bcpu <<<"$(printf '%s' "$bs" | medians)"
  printf '%-36s %12s %8s %7.2f | %12s %8s %7.2f | %6.3f %6.2f %6.3f\n' "$label" "$ar" "$a99" "$acpu" "$br" "$b99" "$bcpu" \
    "$(echo "$br / $ar" | bc -l)" "$(echo "$b99 / ($a99 + 0.0001)" | bc -l)" "$(echo "$bcpu / ($acpu + 0.000001)" | bc -l)"
}
row "CL.THROTTLE random c=50 P=16" 50 16 CL.THROTTLE key:__rand_int__ 15 30 60
row "CL.THROTTLE allowed c=50 P=16" 50 16 CL.THROTTLE ok:__rand_int__ 1000000 1 1
row "CL.THROTTLE random c=50 P=1" 50 1 CL.THROTTLE key:__rand_int__ 15 30 60
# New keys on every call (a key spray): the store grows through the run.
KEYS=100000000 row "CL.THROTTLE new keys c=50 P=16" 50 16 CL.THROTTLE new:__rand_int__ 15 30 60
row "PING c=50 P=16" 50 16 PING
