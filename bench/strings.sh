#!/usr/bin/env bash
# Strings and counters side by side (issue 23): celld's SET, GET, INCR and an
# EVAL of an INCR+PEXPIRE+PTTL script against redis-server's same commands,
# with redis-benchmark (50 connections, pipeline 16) in alternation
# (A B A B ...), the median of ROUNDS runs per side; then the bytes a
# 100-byte string key costs on each (INFO used_memory delta over KEYS keys).
# Needs redis-server, redis-benchmark, redis-cli and Go, like bench/run.sh.
#
# Each side's CPU per call (the server's utime+stime from /proc over the
# run, divided by the calls) is printed beside its req/s: on a loaded
# machine it is the figure to trust, since req/s also measures how much
# CPU redis-benchmark and the neighbours left the server.
#
#   bash bench/strings.sh                     # ~3 minutes
#   N=100000 ROUNDS=1 bash bench/strings.sh   # quick look
#   ROWS="SET INCR" CELLD_BIN=/tmp/celld CELLD_ARGS="--persist no" RAW=1 bash bench/strings.sh
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh

for tool in redis-server redis-benchmark redis-cli go; do
  command -v "$tool" >/dev/null || { echo "missing $tool (apt-get install redis-server redis-tools)" >&2; exit 1; }
done

N=${N:-300000}
ROUNDS=${ROUNDS:-5}
KEYS=${KEYS:-100000}
CPORT=${CPORT:-$((20000 + RANDOM % 12000))}
RPORT=${RPORT:-$((CPORT + 1))}
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; redis-cli -p $RPORT shutdown nosave >/dev/null 2>&1 || true; rm -rf "$work"' EXIT

if [ -n "${CELLD_BIN:-}" ]; then cp "$CELLD_BIN" "$work/celld"; else go build -o "$work/celld" .; fi
"$work/celld" --addr 127.0.0.1:$CPORT --dir "$work/data" ${CELLD_ARGS:-} 2>"$work/celld.log" &
cpid=$!
redis-server --port $RPORT --save '' --appendonly no --daemonize no >"$work/redis.log" 2>&1 &
rpid=$!
for p in $CPORT $RPORT; do
  for _ in $(seq 50); do redis-cli -p $p ping >/dev/null 2>&1 && break; sleep 0.1; done
  redis-cli -p $p ping 2>/dev/null | grep -q PONG ||
    { echo "no server answering on port $p (taken? see $work/*.log)" >&2; tail -3 "$work"/*.log >&2; exit 1; }
done

hz=$(getconf CLK_TCK)
cpu() { awk '{ print $14 + $15 }' "/proc/$1/stat"; } # a server's user+system ticks

bench() { # PORT ARGS... -> "rps p50 p99 cpu_us_per_call" (the server's CPU over the run / calls)
  local port=$1; shift
  local t0 t1 out pid=$cpid
  [ "$port" = "$RPORT" ] && pid=$rpid
  t0=$(cpu $pid)
  out=$(redis-benchmark -p "$port" -c 50 -P 16 -n "$N" -r "$KEYS" --csv "$@" 2>/dev/null |
    awk -F, 'NR==2 { gsub(/"/, ""); print $(NF-6), $(NF-3), $(NF-1) }')
  t1=$(cpu $pid)
  echo "$out $(echo "($t1 - $t0) * 1000000 / $hz / $N" | bc -l | xargs printf '%.2f')"
}

val=$(head -c 100 /dev/zero | tr '\0' v) # 100 bytes
script="local c = redis.call('INCR', KEYS[1]) if c == 1 then redis.call('PEXPIRE', KEYS[1], 60000) end return {c, redis.call('PTTL', KEYS[1])}"

# Warm both with the key set (SET then GET read existing keys).
for p in $CPORT $RPORT; do
  redis-benchmark -p $p -c 50 -P 16 -n $((KEYS * 3)) -r "$KEYS" SET key:__rand_int__ "$val" >/dev/null 2>&1
done

printf '%-28s %12s %8s %8s %7s | %12s %8s %8s %7s | %6s %9s\n' "row (c=50 P=16)" "celld req/s" "p50 ms" "p99 ms" "cpu/c" "redis req/s" "p50 ms" "p99 ms" "cpu/c" "ratio" "cpu ratio"
row() { # label ARGS...
  local label=$1; shift
  if [ -n "${ROWS:-}" ]; then
    local want=0 w
    for w in $ROWS; do case $label in "$w"*) want=1 ;; esac; done
    [ $want = 1 ] || return 0
  fi
  local as="" bs=""
  for _ in $(seq "$ROUNDS"); do
    as+="$(bench $CPORT "$@")"$'\n'
    bs+="$(bench $RPORT "$@")"$'\n'
  done
  local a b
  a=$(printf '%s' "$as" | medians)
  b=$(printf '%s' "$bs" | medians)
  read -r ar a50 a99 ac <<<"$a"
  read -r br b50 b99 bc <<<"$b"
  printf '%-28s %12s %8s %8s %7s | %12s %8s %8s %7s | %6.2f %9.2f\n' "$label" "$ar" "$a50" "$a99" "$ac" "$br" "$b50" "$b99" "$bc" \
    "$(echo "$ar / $br" | bc -l)" "$(echo "$ac / $bc" | bc -l)"
  if [ -n "${RAW:-}" ]; then printf '  celld runs: %s\n  redis runs: %s\n' "$(printf '%s' "$as" | awk '{printf "%s ", $1}')" "$(printf '%s' "$bs" | awk '{printf "%s ", $1}')"; fi
}

row "SET 100-byte value" SET key:__rand_int__ "$val"
row "GET 100-byte value" GET key:__rand_int__
row "INCR" INCR ctr:__rand_int__
row "EVAL INCR+PEXPIRE+PTTL" EVAL "$script" 1 win:__rand_int__

# Memory: INFO used_memory before and after KEYS distinct 100-byte string
# keys on an emptied server.
used() { redis-cli -p "$1" info memory | awk -F: '/^used_memory:/ { gsub(/\r/, ""); print $2 }'; }
for p in $CPORT $RPORT; do redis-cli -p $p flushall >/dev/null; done
c0=$(used $CPORT); r0=$(used $RPORT)
for p in $CPORT $RPORT; do
  # -r larger than KEYS with enough requests fills nearly all of them; the
  # count is read back with DBSIZE.
  redis-benchmark -p $p -c 50 -P 64 -n $((KEYS * 8)) -r "$KEYS" SET mem:__rand_int__ "$val" >/dev/null 2>&1
done
c1=$(used $CPORT); r1=$(used $RPORT)
cn=$(redis-cli -p $CPORT dbsize); rn=$(redis-cli -p $RPORT dbsize)
cb=$(( (c1 - c0) / cn )); rb=$(( (r1 - r0) / rn ))
printf '\nmemory (100-byte values): celld %d B/key (%d keys), redis %d B/key (%d keys), ratio %.2f\n' \
  "$cb" "$cn" "$rb" "$rn" "$(echo "$cb / $rb" | bc -l)"
