#!/usr/bin/env bash
# Side-by-side load run: celld's CL.THROTTLE against redis-server's SET and
# PING, measured with redis-benchmark in alternation (A B A B ...), plus
# memory per key. Installs nothing: it needs redis-server and
# redis-benchmark on PATH (Debian: apt-get install redis-server redis-tools)
# and Go to build celld.
#
# Each row runs ROUNDS alternating pairs (celld, redis, celld, redis, ...)
# and prints the median of each side (req/s, p50 and p99 medianed
# separately), so one noisy run on a shared machine does not decide a row.
#
#   bash bench/run.sh                     # full table (~6 minutes)
#   N=100000 ROUNDS=1 bash bench/run.sh   # quick look
#   CELLD_BIN=/tmp/celld-old bash bench/run.sh   # another build (before/after)
#   CELLD_FLAGS="--maxmemory 1gb --maxmemory-policy volatile-ttl" bash bench/run.sh
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh

for tool in redis-server redis-benchmark redis-cli go; do
  command -v "$tool" >/dev/null || { echo "missing $tool (apt-get install redis-server redis-tools)" >&2; exit 1; }
done

N=${N:-300000}
ROUNDS=${ROUNDS:-3}
KEYS=${KEYS:-100000}
CPORT=${CPORT:-$((20000 + RANDOM % 12000))} # below the ephemeral range (32768+)
RPORT=${RPORT:-$((CPORT + 1))}
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; redis-cli -p $RPORT shutdown nosave >/dev/null 2>&1 || true; rm -rf "$work"' EXIT

if [ -n "${CELLD_BIN:-}" ]; then cp "$CELLD_BIN" "$work/celld"; else go build -o "$work/celld" .; fi
"$work/celld" --addr 127.0.0.1:$CPORT --dir "$work/data" ${CELLD_FLAGS:-} 2>"$work/celld.log" &
redis-server --port $RPORT --save '' --appendonly no --daemonize no >"$work/redis.log" 2>&1 &
for p in $CPORT $RPORT; do
  for _ in $(seq 50); do redis-cli -p $p ping >/dev/null 2>&1 && break; sleep 0.1; done
  # A port taken by someone else would leave redis-benchmark retrying a
  # dead port forever: stop here instead.
  redis-cli -p $p ping 2>/dev/null | grep -q PONG ||
    { echo "no server answering on port $p (taken? see $work/*.log)" >&2; tail -3 "$work"/*.log >&2; exit 1; }
done

# bench PORT CLIENTS PIPELINE ARGS... -> "rps p50 p99"
bench() {
  local port=$1 c=$2 p=$3; shift 3
  redis-benchmark -p "$port" -c "$c" -P "$p" -n "$N" -r "$KEYS" --csv "$@" 2>/dev/null |
    awk -F, 'NR==2 { gsub(/"/, ""); print $2, $5, $7 }'
}

# Warm both servers with the key sets the rows use, so that no row
# measures a store growing from empty (both sides then overwrite).
redis-benchmark -p $CPORT -c 50 -P 16 -n $((KEYS * 3)) -r "$KEYS" CL.THROTTLE key:__rand_int__ 15 30 60 >/dev/null 2>&1
redis-benchmark -p $CPORT -c 50 -P 16 -n $((KEYS * 3)) -r "$KEYS" CL.THROTTLE ok:__rand_int__ 1000000 1 1 >/dev/null 2>&1
redis-benchmark -p $RPORT -c 50 -P 16 -n $((KEYS * 3)) -r "$KEYS" SET key:__rand_int__ 1796012296590996844 >/dev/null 2>&1

printf '%-34s %12s %8s %8s | %-10s %12s %8s %8s | %6s %9s\n' \
  "celld row" "req/s" "p50 ms" "p99 ms" "redis" "req/s" "p50 ms" "p99 ms" "ratio" "p99 ratio"
row() { # label c p redis-test celld-args...
  local label=$1 c=$2 p=$3 rtest=$4; shift 4
  local as="" bs=""
  for _ in $(seq "$ROUNDS"); do
    as+="$(bench $CPORT "$c" "$p" "$@")"$'\n'
    if [ "$rtest" = set ]; then
      bs+="$(bench $RPORT "$c" "$p" SET key:__rand_int__ 1796012296590996844)"$'\n'
    else
      bs+="$(bench $RPORT "$c" "$p" PING)"$'\n'
    fi
  done
  local a b
  a=$(printf '%s' "$as" | medians)
  b=$(printf '%s' "$bs" | medians)
  read -r ar a50 a99 <<<"$a"
  read -r br b50 b99 <<<"$b"
  printf '%-34s %12s %8s %8s | %-10s %12s %8s %8s | %6.2f %9.2f\n' \
    "$label" "$ar" "$a50" "$a99" "$rtest" "$br" "$b50" "$b99" \
    "$(echo "$ar / $br" | bc -l)" "$(echo "$a99 / ($b99 + 0.0001)" | bc -l)"
}

row "CL.THROTTLE random c=50 P=16"  50 16 set  CL.THROTTLE key:__rand_int__ 15 30 60
# 15 30 60 (burst 15, 30 per minute) soon limits keys called several
# times a second, and a denied call writes nothing; "allowed" rows use a
# limit no key reaches, so that every call writes its key, as SET does.
row "CL.THROTTLE allowed c=50 P=16"  50 16 set  CL.THROTTLE ok:__rand_int__ 1000000 1 1
row "CL.THROTTLE random c=50 P=1"   50 1  ping CL.THROTTLE key:__rand_int__ 15 30 60
row "CL.THROTTLE allowed c=50 P=1"   50 1  ping CL.THROTTLE ok:__rand_int__ 1000000 1 1
row "CL.THROTTLE random c=500 P=16" 500 16 set CL.THROTTLE key:__rand_int__ 15 30 60
row "CL.THROTTLE random c=500 P=1"  500 1 ping CL.THROTTLE key:__rand_int__ 15 30 60
row "CL.THROTTLE hot key c=50 P=16" 50 16 set  CL.THROTTLE hot 15 30 60
row "CL.THROTTLE hot key c=50 P=1"  50 1  ping CL.THROTTLE hot 15 30 60
row "PING c=50 P=16"                50 16 ping PING
row "PING c=50 P=1"                 50 1  ping PING

# Memory: RSS growth per key for the same 1M-ish keys. Both readings are
# taken after 5 s of quiet, so that they count what the keys cost rather
# than a burst's transient buffers (celld gives those back a few windows
# after the changes stop; Redis has none to give back).
rss() { awk '/VmRSS/ {print $2 * 1024}' "/proc/$1/status"; }
cpid=$(pgrep -f "$work/celld" | head -1)
rpid=$(pgrep -f "redis-server .*:$RPORT" | head -1)
redis-cli -p $CPORT flushall >/dev/null; redis-cli -p $RPORT flushall >/dev/null
sleep 5
c0=$(rss "$cpid"); r0=$(rss "$rpid")
redis-benchmark -p $CPORT -c 50 -P 64 -n 3000000 -r 1000000 CL.THROTTLE key:__rand_int__ 15 30 3600 >/dev/null 2>&1
redis-benchmark -p $RPORT -c 50 -P 64 -n 3000000 -r 1000000 SET key:__rand_int__ 1796012296590996844 PX 3600000 >/dev/null 2>&1
sleep 5
c1=$(rss "$cpid"); r1=$(rss "$rpid")
cn=$(redis-cli -p $CPORT dbsize); rn=$(redis-cli -p $RPORT dbsize)
cb=$(( (c1 - c0) / cn )); rb=$(( (r1 - r0) / rn ))
printf '\nmemory: celld %d B/key (%d keys), redis %d B/key (%d keys), ratio %.2f\n' \
  "$cb" "$cn" "$rb" "$rn" "$(echo "$cb / $rb" | bc -l)"
