#!/bin/bash
# writes a data dir with the base build: LOG keys in the base file (SAVE) and in the change log (kill -9 after flush)
set -e
D=/tmp/log18/fx/dir; mkdir -p $D
/tmp/bis/celld-base18 --addr 127.0.0.1:7391 --dir $D --log-fold-min-bytes 1500 >/tmp/log18/fx/base.log 2>&1 &
PID=$!
sleep 1
W=1000000000000
c() { redis-cli -p 7391 "$@" >/dev/null; }
# base-file keys: entries 1 ms apart and further, counts > 127, bursts
for i in $(seq 0 19); do
  for j in $(seq 0 $((i % 7 + 1))); do c CL.WINDOW lg:base:$i 100000 $W $(( (i*j) % 5 + 1 + (i==3)*200 )); sleep 0.0$((j%3)); done
done
redis-cli -p 7391 SAVE
for i in $(seq 0 19); do
  for j in $(seq 0 $((i % 5 + 1))); do c CL.WINDOW lg:log:$i 100000 $W $(( (i+j) % 4 + 1 )); sleep 0.0$((j%2)); done
done
c CL.WINDOW lg:base:0 100000 $W 1
sleep 1.5
redis-cli -p 7391 INFO persistence | grep -E "flushes|dirty"
# want: for each key, used, and for k=1..used the (reset - retry) of a denial of q = limit-used+k
for k in $(redis-cli -p 7391 --scan --pattern 'lg:*' | sort); do
  r=($(redis-cli -p 7391 CL.WINDOW $k 100000 $W 0))
  used=$((100000 - ${r[2]}))
  line="$k $used"
  for kk in $(seq 1 $used); do
    d=($(redis-cli -p 7391 CL.WINDOW $k 100000 $W $((100000 - used + kk))))
    line="$line $(( ${d[4]} - ${d[3]} ))"
  done
  echo "$line" >> /tmp/log18/fx/want.txt
done
kill -9 $PID
