#!/usr/bin/env bash
# Side-by-side load run of the data-type commands limiter code uses
# (docs/data-types.md): celld against redis-server, the same command on
# both, redis-benchmark c=50 P=16 in alternation (A B A B ...), medians of
# ROUNDS pairs; then bytes per key for a 10-field hash, a 100-element list
# and a 100-member sorted set (MEMORY USAGE, used_memory delta, RSS delta).
#
#   bash bench/types.sh                     # full table (~4 minutes)
#   N=100000 ROUNDS=1 bash bench/types.sh   # quick look
#   PERSIST=no bash bench/types.sh          # celld without persistence (--persist no)
#   PERSIST="no yes" PART=throughput bash bench/types.sh  # both, handler cost vs persistence cost
#   ROWS="HSET ZADD" bash bench/types.sh    # only rows whose label starts with these words
#   CELLD_BIN=/tmp/celld-old bash bench/types.sh          # a prebuilt binary
#
# Each throughput row prints medians (req/s, p50, p99) for both servers,
# celld's CPU µs per call (read from /proc around each of its runs; on a
# shared machine it moves much less than req/s), the ratio of the median
# req/s, and the min-max of the per-round ratios. redis-server runs without
# persistence (--save '' --appendonly no); celld with --persist as PERSIST
# says (default yes), so a row run with both shows what persistence costs.
#
# The MULTI sliding log cannot be driven by redis-benchmark (one command per
# request): its "sliding log (EVAL)" row runs the same four commands in one
# EVAL on both sides, and its "sliding log (MULTI)" row sends them as the
# designs do, MULTI ZADD ZREMRANGEBYSCORE ZCARD EXPIRE EXEC, through
# bench/replload -tx (same c and P; a request is one transaction; N/4 of
# them, TXN to change it; CPU per call is per transaction).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh

for tool in redis-server redis-benchmark redis-cli go; do
  command -v "$tool" >/dev/null || { echo "missing $tool (apt-get install redis-server redis-tools)" >&2; exit 1; }
done

N=${N:-300000}
PERSIST=${PERSIST:-yes}
PART=${PART:-all}
ROUNDS=${ROUNDS:-3}
KEYS=${KEYS:-100000}
MKEYS=${MKEYS:-10000} # keys per memory row
CPORT=${CPORT:-$((20000 + RANDOM % 12000))}
RPORT=${RPORT:-$((CPORT + 1))}
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; redis-cli -p $RPORT shutdown nosave >/dev/null 2>&1 || true; rm -rf "$work"' EXIT

if [ -n "${CELLD_BIN:-}" ]; then cp "$CELLD_BIN" "$work/celld"; else go build -o "$work/celld" .; fi
go build -o "$work/replload" ./bench/replload
redis-server --port $RPORT --save '' --appendonly no --daemonize no >"$work/redis.log" 2>&1 &
up() { # port
  for _ in $(seq 50); do redis-cli -p $1 ping >/dev/null 2>&1 && break; sleep 0.1; done
  redis-cli -p $1 ping 2>/dev/null | grep -q PONG ||
    { echo "no server answering on port $1 (see $work/*.log)" >&2; tail -3 "$work"/*.log >&2; exit 1; }
}
up $RPORT
hz=$(getconf CLK_TCK)
cpid=
start_celld() { # persist: yes|no
  [ -n "$cpid" ] && { kill "$cpid"; wait "$cpid" 2>/dev/null || true; }
  rm -rf "$work/data"
  "$work/celld" --addr 127.0.0.1:$CPORT --dir "$work/data" --persist "$1" 2>>"$work/celld.log" &
  cpid=$!
  up $CPORT
}
cpu() { awk '{ print $14 + $15 }' "/proc/$cpid/stat"; } # celld's user+system ticks

bench() { # port args... -> "rps p50 p99" (celld's: "rps p50 p99 cpu_us_per_call"); args TX ...: a transaction per request
  local port=$1; shift
  local t0 t1 out n=$N
  [ "$port" = "$CPORT" ] && t0=$(cpu)
  if [ "$1" = TX ]; then
    shift
    n=${TXN:-$((N / 4))}
    out=$("$work/replload" -addr 127.0.0.1:$port -c 50 -P 16 -n "$n" -r "$KEYS" -tx "$@" | awk '{ print $1, $2, $3 }')
  else
    out=$(redis-benchmark -p "$port" -c 50 -P 16 -n "$N" -r "$KEYS" --csv "$@" 2>/dev/null |
      awk -F, 'END { gsub(/"/, ""); print $(NF-6), $(NF-3), $(NF-1) }') # the script rows' names hold commas
  fi
  if [ "$port" = "$CPORT" ]; then
    t1=$(cpu)
    out="$out $(echo "($t1 - $t0) * 1000000 / $hz / $n" | bc -l | xargs printf '%.2f')"
  fi
  echo "$out"
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
fill() { # port
  redis-benchmark -p $1 -c 50 -P 16 -n $KEYS -r $KEYS HSET hr:__rand_int__ f1 v1 f2 v2 >/dev/null 2>&1
  for _ in $(seq 10); do redis-benchmark -p $1 -c 50 -P 16 -n $((KEYS * 3)) -r $KEYS RPUSH lr:__rand_int__ item >/dev/null 2>&1; done
}

row() { # label args...
  local label=$1; shift
  if [ -n "${ROWS:-}" ]; then
    local want=0 w
    for w in $ROWS; do case $label in "$w"*) want=1 ;; esac; done
    [ $want = 1 ] || return 0
  fi
  local as="" bs="" rs=""
  for _ in $(seq "$ROUNDS"); do
    local a b
    a=$(bench $CPORT "$@"); b=$(bench $RPORT "$@")
    as+="$a"$'\n'; bs+="$b"$'\n'
    rs+="$(echo "${a%% *} / ${b%% *}" | bc -l)"$'\n'
  done
  local am bm lo hi
  am=$(printf '%s' "$as" | medians); bm=$(printf '%s' "$bs" | medians)
  read -r ar a50 a99 ac <<<"$am"; read -r br b50 b99 <<<"$bm"
  lo=$(printf '%s' "$rs" | sort -g | head -1); hi=$(printf '%s' "$rs" | sort -g | tail -1)
  printf '%-30s %11s %7s %7s %6s | %11s %7s %7s | %6.2f %5.2f-%5.2f\n' "$label" "$ar" "$a50" "$a99" "$ac" "$br" "$b50" "$b99" \
    "$(echo "$ar / $br" | bc -l)" "$lo" "$hi"
}

for persist in $PERSIST; do
  start_celld "$persist"
  [ "$PART" = memory ] && break
  redis-cli -p $RPORT flushall >/dev/null
  fill $CPORT
  fill $RPORT
  echo "celld --persist $persist; redis-server without persistence"
  printf '%-30s %11s %7s %7s %6s | %11s %7s %7s | %6s %11s\n' "row (c=50 P=16)" "celld req/s" "p50 ms" "p99 ms" "cpu/c" \
    "redis req/s" "p50 ms" "p99 ms" "ratio" "round range"
  row "HSET"                 HSET h:__rand_int__ field value
  row "HMGET (2 fields)"     HMGET hr:__rand_int__ f1 f2
  row "LPUSH"                LPUSH l:__rand_int__ item
  row "LRANGE 0 9"           LRANGE lr:__rand_int__ 0 9
  row "ZADD"                 ZADD z:__rand_int__ __rand_int__ m:__rand_int__
  row "sliding log (EVAL)"   EVAL "$(tr '\n' ' ' <<<"$SLIDING")" 1 sl:__rand_int__
  row "sliding log (MULTI)"  TX ZADD sm:__rand_int__ __now_ms__ __now_ms__-__uniq__ \; \
                             ZREMRANGEBYSCORE sm:__rand_int__ 0 __now_ms_1000__ \; ZCARD sm:__rand_int__ \; EXPIRE sm:__rand_int__ 2
  row "funnel EVAL"          EVAL "$(tr '\n' ' ' <<<"$FUNNEL")" 1 fn:__rand_int__ 100 0.5
  echo "(cpu/c = celld CPU µs per call; ratio = celld/redis median req/s; round range = min-max of per-round ratios)"
  echo
done
[ "$PART" = throughput ] && exit 0

# Memory per key: MKEYS keys of each shape, fed with redis-cli --pipe.
used() { redis-cli -p "$1" info memory | awk -F: '/^used_memory:/ { print $2 + 0 }'; }
rss() { awk '/VmRSS/ {print $2 * 1024}' "/proc/$1/status"; }
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
