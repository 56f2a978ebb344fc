#!/usr/bin/env bash
# Redis's own Tcl test suite against celld, unit by unit, beside a real
# redis-server: see README.md. Downloads nothing.
#
#   redis-suite/run.sh --redis DIR [--celld HOST:PORT] [UNIT ...]
#
# DIR is a Redis 7.0.x source tree (or any directory holding its runtest and
# tests/). Without --celld, celld is built from this checkout (go build) and
# started fresh for each unit; with it, that running celld is used (its
# keyspace is flushed by the tests). A fresh redis-server (from PATH, or
# REDIS_SERVER=path) is the reference for each unit. UNIT as runtest names
# it (type/string, expire, ...); default: the units listed in README.md.
# Env: UNIT_TIMEOUT (s, default 120), LOG=FILE keeps every runtest output,
# NO_FUNCTIONS=0 keeps unit/scripting's FUNCTION pass.
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
redis_dir= celld_addr=
units=()
while [ $# -gt 0 ]; do
  case $1 in
    --redis) redis_dir=${2:?--redis needs a directory}; shift 2 ;;
    --celld) celld_addr=${2:?--celld needs HOST:PORT}; shift 2 ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) units+=("$1"); shift ;;
  esac
done
[ ${#units[@]} -gt 0 ] || units=(protocol keyspace expire multi introspection introspection-2 querybuf
                                  scripting tracking info-command type/string)
timeout_s=${UNIT_TIMEOUT:-120}
redis_server=${REDIS_SERVER:-redis-server}

die() { echo "redis-suite: $*" >&2; exit 2; }
[ -n "$redis_dir" ] || die "give --redis DIR, a Redis 7.0.x tree with runtest and tests/"
[ -x "$redis_dir/runtest" ] && [ -d "$redis_dir/tests/unit" ] || die "$redis_dir has no runtest and tests/unit"
command -v tclsh >/dev/null || die "no tclsh (apt-get install tcl)"
command -v "$redis_server" >/dev/null || die "no $redis_server (apt-get install redis-server)"
command -v redis-cli >/dev/null || die "no redis-cli (apt-get install redis-tools)"
command -v python3 >/dev/null || die "no python3"

work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]:-}"; do [ -n "$p" ] && kill -9 "$p" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
wait_ping() { # host port
  for _ in $(seq 150); do [ "$(redis-cli -h "$1" -p "$2" PING 2>/dev/null)" = PONG ] && return 0; sleep 0.1; done
  return 1
}
start() { # log cmd...: start a server, remember its pid in $started
  "${@:2}" >"$1" 2>&1 &
  started=$!; pids+=("$started"); disown "$started" 2>/dev/null
}

if [ -z "$celld_addr" ]; then
  (cd "$root" && go build -o "$work/bin/celld" .) || die "go build failed"
else
  celld_host=${celld_addr%:*} celld_port=${celld_addr##*:}
  wait_ping "$celld_host" "$celld_port" || die "no celld answering PING at $celld_addr"
fi

# Each side gets its own copy of the suite (runtest writes into tests/tmp).
# External mode's cleanup calls FUNCTION FLUSH, which celld does not have:
# it is made optional, the only change to the suite.
for side in redis celld; do
  mkdir -p "$work/$side"
  cp -r "$redis_dir/runtest" "$redis_dir/tests" "$work/$side/"
  [ -d "$redis_dir/src" ] && mkdir -p "$work/$side/src" && cp "$redis_dir"/src/version.h "$work/$side/src/" 2>/dev/null
  mkdir -p "$work/$side/tests/tmp"
  sed -i 's/^    r function flush$/    catch {r function flush}/' "$work/$side/tests/support/server.tcl"
  # unit/scripting runs its tests twice, through FUNCTION (which celld
  # does not offer) and through EVAL: only the EVAL pass is run, on both
  # sides (NO_FUNCTIONS=0 runs both passes).
  [ "${NO_FUNCTIONS:-1}" = 1 ] && sed -i 's/^foreach is_eval {0 1} {$/foreach is_eval {1} {/' "$work/$side/tests/unit/scripting.tcl"
done

# Tags neither side can run in external mode (they need DEBUG, a local
# server process, replication, ...), skipped on both.
tags='-needs:debug -needs:repl -needs:config-maxmemory -needs:pfdebug -needs:latency -needs:local-process -needs:save -needs:reset'
runtest() { # side host port unit baseport
  ( cd "$work/$1" && TERM=dumb timeout -k 5 "$timeout_s" ./runtest --host "$2" --port "$3" \
      --durable --ignore-encoding --ignore-digest --tags "$tags" --timeout "$timeout_s" \
      --baseport "$5" --single "unit/$4" >"$work/$1.out" 2>&1 </dev/null
    echo $? >"$work/$1.rc" )
}

printf '%-16s %-28s %-28s %s\n' unit redis-server celld differences
: >"$work/all.tsv"
total=0
for unit in "${units[@]}"; do
  [ -f "$redis_dir/tests/unit/$unit.tcl" ] || { echo "redis-suite: no unit $unit"; continue; }
  rp=$(free_port)
  mkdir -p "$work/rdata"
  start "$work/redis.log" "$redis_server" --port "$rp" --bind 127.0.0.1 --save '' --appendonly no \
      --protected-mode no --dir "$work/rdata"
  rpid=$started
  wait_ping 127.0.0.1 "$rp" || die "redis-server did not start: $(tail -2 "$work/redis.log")"
  cpid=
  if [ -z "$celld_addr" ]; then
    ch=127.0.0.1 cp_=$(free_port)
    while [ "$cp_" = "$rp" ]; do cp_=$(free_port); done
    rm -rf "$work/cdata"
    start "$work/celld.log" "$work/bin/celld" --addr "127.0.0.1:$cp_" --dir "$work/cdata" --persist=false
    cpid=$started
    wait_ping 127.0.0.1 "$cp_" || die "celld did not start: $(tail -2 "$work/celld.log")"
  else
    ch=$celld_host cp_=$celld_port
  fi
  runtest redis 127.0.0.1 "$rp" "$unit" 21111 & a=$!
  runtest celld "$ch" "$cp_" "$unit" 31111 & b=$!
  wait "$a" "$b"
  kill -9 "$rpid" 2>/dev/null; [ -n "$cpid" ] && kill -9 "$cpid" 2>/dev/null
  python3 "$here/compare.py" "$unit" "$work/redis.out" "$(cat "$work/redis.rc")" \
      "$work/celld.out" "$(cat "$work/celld.rc")" >"$work/unit.tsv"
  IFS=$'\t' read -r _ _ rok rst cok cst nd < <(grep '^UNIT' "$work/unit.tsv")
  grep '^DIFF' "$work/unit.tsv" >>"$work/all.tsv"
  total=$((total + nd))
  printf '%-16s %-28s %-28s %s\n' "$unit" "$rok passed ($rst)" "$cok passed ($cst)" "$nd"
  if [ -n "${LOG:-}" ]; then
    { echo "=== $unit"; echo "--- redis-server"; cat "$work/redis.out"; echo "--- celld"; cat "$work/celld.out"; } >>"$LOG"
  fi
done
echo
echo "Tests that pass on redis-server and not on celld ($total):"
cut -f2- "$work/all.tsv" | sed 's/\t/: /; s/\t/ -- /'
