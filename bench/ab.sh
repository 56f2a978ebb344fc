#!/usr/bin/env bash
# Before/after: two builds of celld (two git revisions) side by side, each
# with its defaults (persistence on), measured with redis-benchmark in
# alternation (A B A B ...) so both see the same machine. Prints the median
# req/s and p99 of each side per row and the ratio B/A. Use it for any
# change to the hot path, beside bench/run.sh (which compares with Redis).
#
#   bash bench/ab.sh REV_A [REV_B]     # REV_B defaults to the work tree
#   ROUNDS=5 N=300000 bash bench/ab.sh main
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
  if [ -z "$1" ]; then go build -o "$2" .; return; fi
  git worktree add -q --detach "$work/src-$(basename "$2")" "$1"
  (cd "$work/src-$(basename "$2")" && go build -o "$2" .)
  git worktree remove --force "$work/src-$(basename "$2")"
}
build "$1" "$work/celld-a"
build "${2:-}" "$work/celld-b"
"$work/celld-a" --addr 127.0.0.1:$APORT --dir "$work/data-a" 2>"$work/a.log" &
"$work/celld-b" --addr 127.0.0.1:$BPORT --dir "$work/data-b" 2>"$work/b.log" &
for p in $APORT $BPORT; do
  for _ in $(seq 50); do redis-cli -p $p ping >/dev/null 2>&1 && break; sleep 0.1; done
  redis-cli -p $p ping 2>/dev/null | grep -q PONG || { echo "no server on port $p" >&2; tail -3 "$work"/*.log >&2; exit 1; }
done

bench() { # port c p args... -> "rps p99"
  local port=$1 c=$2 p=$3; shift 3
  redis-benchmark -p "$port" -c "$c" -P "$p" -n "$N" -r "$KEYS" --csv "$@" 2>/dev/null |
    awk -F, 'NR==2 { gsub(/"/, ""); print $2, $7 }'
}
for p in $APORT $BPORT; do
  redis-benchmark -p $p -c 50 -P 16 -n $((KEYS * 3)) -r "$KEYS" CL.THROTTLE key:__rand_int__ 15 30 60 >/dev/null 2>&1
  redis-benchmark -p $p -c 50 -P 16 -n $((KEYS * 3)) -r "$KEYS" CL.THROTTLE ok:__rand_int__ 1000000 1 1 >/dev/null 2>&1
done

printf '%-36s %12s %8s | %12s %8s | %6s %6s\n' "row (A=${1} B=${2:-worktree})" "A req/s" "A p99" "B req/s" "B p99" "B/A" "p99 B/A"
row() { # label c p args...
  local label=$1 c=$2 p=$3; shift 3
  local as="" bs=""
  for _ in $(seq "$ROUNDS"); do
    as+="$(bench $APORT "$c" "$p" "$@")"$'\n'
    bs+="$(bench $BPORT "$c" "$p" "$@")"$'\n'
  done
  local ar a99 br b99
  read -r ar a99 <<<"$(printf '%s' "$as" | medians)"
  read -r br b99 <<<"$(printf '%s' "$bs" | medians)"
  printf '%-36s %12s %8s | %12s %8s | %6.3f %6.2f\n' "$label" "$ar" "$a99" "$br" "$b99" \
    "$(echo "$br / $ar" | bc -l)" "$(echo "$b99 / ($a99 + 0.0001)" | bc -l)"
}
row "CL.THROTTLE random c=50 P=16" 50 16 CL.THROTTLE key:__rand_int__ 15 30 60
row "CL.THROTTLE allowed c=50 P=16" 50 16 CL.THROTTLE ok:__rand_int__ 1000000 1 1
row "CL.THROTTLE random c=50 P=1" 50 1 CL.THROTTLE key:__rand_int__ 15 30 60
# New keys on every call (a key spray): the store grows through the run.
KEYS=100000000 row "CL.THROTTLE new keys c=50 P=16" 50 16 CL.THROTTLE new:__rand_int__ 15 30 60
row "PING c=50 P=16" 50 16 PING
