#!/usr/bin/env bash
# Side-by-side load run of the data-type commands limiter code uses
# (docs/data-types.md): celld against redis-server, the same command on
# both, redis-benchmark c=50 P=16 in alternation (A B A B ...), medians of
# ROUNDS pairs; then bytes per key for a 10-field hash, a 100-element list
# and a 100-member sorted set (MEMORY USAGE, used_memory delta, RSS delta).
#
#   bash bench/types.sh                     # full table (~4 minutes)
#   N=100000 ROUNDS=1 bash bench/types.sh   # quick look
#
# The MULTI sliding log cannot be driven by redis-benchmark (one command per
# request): its row runs the same four commands in one EVAL on both sides.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh

for tool in redis-server redis-benchmark redis-cli go; do
  command -v "$tool" >/dev/null || { echo "missing $tool (apt-get install redis-server redis-tools)" >&2; exit 1; }
done

N=${N:-300000}
ROUNDS=${ROUNDS:-3}
KEYS=${KEYS:-100000}
MKEYS=${MKEYS:-10000} # keys per memory row
CPORT=${CPORT:-$((20000 + RANDOM % 12000))}
RPORT=${RPORT:-$((CPORT + 1))}
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; redis-cli -p $RPORT shutdown nosave >/dev/null 2>&1 || true; rm -rf "$work"' EXIT

go build -o "$work/celld" .
"$work/celld" --addr 127.0.0.1:$CPORT --dir "$work/data" 2>"$work/celld.log" &
redis-server --port $RPORT --save '' --appendonly no --daemonize no >"$work/redis.log" 2>&1 &
for p in $CPORT $RPORT; do
  for _ in $(seq 50); do redis-cli -p $p ping >/dev/null 2>&1 && break; sleep 0.1; done
  redis-cli -p $p ping 2>/dev/null | grep -q PONG ||
    { echo "no server answering on port $p (see $work/*.log)" >&2; tail -3 "$work"/*.log >&2; exit 1; }
done

bench() { # port args... -> "rps p50 p99"
  local port=$1; shift
  redis-benchmark -p "$port" -c 50 -P 16 -n "$N" -r "$KEYS" --csv "$@" 2>/dev/null |
    awk -F, 'END { gsub(/"/, ""); print $(NF-6), $(NF-3), $(NF-1) }' # the script rows' names hold commas
}

FUNNEL="local t = redis.call('TIME') local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local v = redis.call('HMGET', KEYS[1], 'water', 'lastTime')
local water = tonumber(v[1]) or 0 local last = tonumber(v[2]) or now
water = math.max(0, water - (now - last) * tonumber(ARGV[2]))
local ok = 0 if water + 1 <= tonumber(ARGV[1]) then water = water + 1 ok = 1 end
redis.call('HMSET', KEYS[1], 'water', water, 'lastTime', now)
redis.call('EXPIRE', KEYS[1], 86400) return ok"
SLIDING="local t = redis.call('TIME') local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZADD', KEYS[1], now, now .. '-' .. t[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], 0, now - 1000)
local n = redis.call('ZCARD', KEYS[1])
redis.call('EXPIRE', KEYS[1], 2) return n"

# Data the read rows read: 2-field hashes and 10-element lists.
for p in $CPORT $RPORT; do
  redis-benchmark -p $p -c 50 -P 16 -n $KEYS -r $KEYS HSET hr:__rand_int__ f1 v1 f2 v2 >/dev/null 2>&1
  for _ in $(seq 10); do redis-benchmark -p $p -c 50 -P 16 -n $((KEYS * 3)) -r $KEYS RPUSH lr:__rand_int__ item >/dev/null 2>&1; done
done

printf '%-30s %12s %8s %8s | %12s %8s %8s | %6s\n' "row (c=50 P=16)" "celld req/s" "p50 ms" "p99 ms" "redis req/s" "p50 ms" "p99 ms" "ratio"
row() { # label args...
  local label=$1; shift
  local as="" bs=""
  for _ in $(seq "$ROUNDS"); do
    as+="$(bench $CPORT "$@")"$'\n'
    bs+="$(bench $RPORT "$@")"$'\n'
  done
  local a b
  a=$(printf '%s' "$as" | medians); b=$(printf '%s' "$bs" | medians)
  read -r ar a50 a99 <<<"$a"; read -r br b50 b99 <<<"$b"
  printf '%-30s %12s %8s %8s | %12s %8s %8s | %6.2f\n' "$label" "$ar" "$a50" "$a99" "$br" "$b50" "$b99" "$(echo "$ar / $br" | bc -l)"
}
row "HSET"                 HSET h:__rand_int__ field value
row "HMGET (2 fields)"     HMGET hr:__rand_int__ f1 f2
row "LPUSH"                LPUSH l:__rand_int__ item
row "LRANGE 0 9"           LRANGE lr:__rand_int__ 0 9
row "ZADD"                 ZADD z:__rand_int__ __rand_int__ m:__rand_int__
row "sliding log (EVAL)"   EVAL "$(tr '\n' ' ' <<<"$SLIDING")" 1 sl:__rand_int__
row "funnel EVAL"          EVAL "$(tr '\n' ' ' <<<"$FUNNEL")" 1 fn:__rand_int__ 100 0.5

# Memory per key: MKEYS keys of each shape, fed with redis-cli --pipe.
used() { redis-cli -p "$1" info memory | awk -F: '/^used_memory:/ { print $2 + 0 }'; }
rss() { awk '/VmRSS/ {print $2 * 1024}' "/proc/$1/status"; }
cpid=$(pgrep -f "$work/celld" | head -1)
rpid=$(pgrep -f "redis-server .*:$RPORT" | head -1)
shape() { # name -> inline commands for MKEYS keys
  case $1 in
    hash) awk -v n=$MKEYS 'BEGIN { for (k = 0; k < n; k++) { printf "HSET mh:%d", k; for (f = 0; f < 10; f++) printf " field%d value%d", f, f; print "" } }' ;;
    list) awk -v n=$MKEYS 'BEGIN { for (k = 0; k < n; k++) { printf "RPUSH ml:%d", k; for (f = 0; f < 100; f++) printf " item%d", f; print "" } }' ;;
    zset) awk -v n=$MKEYS 'BEGIN { for (k = 0; k < n; k++) { printf "ZADD mz:%d", k; for (f = 0; f < 100; f++) printf " %d member%d", 1700000000000 + f, f; print "" } }' ;;
  esac
}
printf '\n%-28s %10s %10s | %10s %10s | %8s %8s\n' "bytes per key ($MKEYS keys)" "celld MEM" "redis MEM" "celld used" "redis used" "celld RSS" "redis RSS"
for s in hash list zset; do
  redis-cli -p $CPORT flushall >/dev/null; redis-cli -p $RPORT flushall >/dev/null
  sleep 2
  cu0=$(used $CPORT); ru0=$(used $RPORT); cr0=$(rss "$cpid"); rr0=$(rss "$rpid")
  shape $s | redis-cli -p $CPORT --pipe >/dev/null
  shape $s | redis-cli -p $RPORT --pipe >/dev/null
  sleep 2
  cu1=$(used $CPORT); ru1=$(used $RPORT); cr1=$(rss "$cpid"); rr1=$(rss "$rpid")
  pre=${s:0:1}
  cm=$(redis-cli -p $CPORT memory usage m$pre:1); rm_=$(redis-cli -p $RPORT memory usage m$pre:1)
  printf '%-28s %10s %10s | %10d %10d | %8d %8d\n' "$s" "$cm" "$rm_" \
    $(( (cu1 - cu0) / MKEYS )) $(( (ru1 - ru0) / MKEYS )) $(( (cr1 - cr0) / MKEYS )) $(( (rr1 - rr0) / MKEYS ))
done
