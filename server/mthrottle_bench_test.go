package server

import (
	"fmt"
	"testing"
)

// BenchmarkBatchMThrottle3 is BenchmarkBatchThrottle's shape (parseBatch,
// prefetch, runBatch for 16 pipelined calls, no socket) for CL.MTHROTTLE
// with three groups on keys drawn from three sets of 100k (as
// bench/family.sh's row): its ns/op over BenchmarkBatchThrottle's is the
// per-call cost ratio issue 17's bar (<= 1.6) speaks of, less the socket.
func BenchmarkBatchMThrottle3(b *testing.B) { benchMThrottleFloor(b, "mthrottle3") }

// BenchmarkMThrottleFloor puts CL.MTHROTTLE's cost per call beside its
// floor, in one process, each row on warm keys drawn from sets of 100k
// (a, b and c: 300k keys), 16 calls per batch:
//
//   - throttle: one CL.THROTTLE per op (BenchmarkBatchThrottle's load);
//   - throttle-x3: three CL.THROTTLE commands per op, one on each set (48
//     commands per batch): the three decisions done as three calls, which
//     pays the per-command cost (parse, dispatch, counters, reply array)
//     three times;
//   - mthrottle3: one CL.MTHROTTLE with the same three groups per op.
//
// mthrottle3/throttle is the bar's ratio (<= 1.6); the floor for the three
// decisions' own work is what throttle-x3 costs less the two commands'
// overhead it pays twice over mthrottle3. Besides ns/op each row reports
// cpu-ns/op, the process's CPU time per op, steadier than wall time on a
// shared machine.
func BenchmarkMThrottleFloor(b *testing.B) {
	for _, name := range []string{"throttle", "throttle-x3", "mthrottle3"} {
		b.Run(name, func(b *testing.B) { benchMThrottleFloor(b, name) })
	}
}

// BenchmarkMThrottleAllowed is BenchmarkMThrottleFloor's throttle and
// mthrottle3 rows with bench/family.sh's limit (max_burst 1000000, 1 per
// 60 s): every call is allowed and writes its keys, where the rows above
// (15 30 60, BenchmarkBatchThrottle's) are mostly denied after the first
// hits and write nothing.
func BenchmarkMThrottleAllowed(b *testing.B) {
	for _, name := range []string{"throttle", "mthrottle3"} {
		b.Run(name, func(b *testing.B) { benchMThrottle(b, name, allowedLimit) })
	}
}

// A limit's three numbers, as the benchmark's requests spell them.
type benchLimit struct{ burst, count, period string }

var (
	floorLimit   = benchLimit{"15", "30", "60"}
	allowedLimit = benchLimit{"1000000", "1", "60"}
)

func benchMThrottleFloor(b *testing.B, name string) { benchMThrottle(b, name, floorLimit) }

func benchMThrottle(b *testing.B, name string, lim benchLimit) {
	s, c := newDispatchFixture(b)
	const depth, nkeys = 16, 100_000
	key := func(p string, k int) string { return fmt.Sprintf("%s:%012d", p, k) }
	sets := []string{"a", "b", "c"}
	bulk := func(buf []byte, a string) []byte { return fmt.Appendf(buf, "$%d\r\n%s\r\n", len(a), a) }
	throttle := func(buf []byte, k string) []byte {
		buf = bulk(append(buf, "*5\r\n$11\r\nCL.THROTTLE\r\n"...), k)
		return bulk(bulk(bulk(buf, lim.burst), lim.count), lim.period)
	}
	var pipes [][]byte
	for p := 0; p < 64; p++ {
		var buf []byte
		for i := 0; i < depth; i++ {
			k := (p*depth + i) * 7919 % nkeys
			switch name {
			case "throttle":
				buf = throttle(buf, key("a", k))
			case "throttle-x3":
				for _, pre := range sets {
					buf = throttle(buf, key(pre, k))
				}
			case "mthrottle3":
				buf = fmt.Appendf(buf, "*16\r\n$12\r\nCL.MTHROTTLE\r\n")
				for _, pre := range sets {
					buf = bulk(bulk(bulk(bulk(buf, key(pre, k)), lim.burst), lim.count), lim.period)
					buf = bulk(buf, "1")
				}
			}
		}
		pipes = append(pipes, buf)
	}
	for k := 0; k < nkeys; k++ { // fill the keyspace: every row sees 300k keys
		for _, pre := range sets {
			c.out = c.out[:0]
			s.dispatchLookup(c, bargs("CL.THROTTLE", key(pre, k), lim.burst, lim.count, lim.period))
		}
	}
	st := &connState{hashes: make([]uint64, max(maxBatchCmds, maxPrefetchKeys))}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPUNs()
	for i := 0; i < b.N; i += depth {
		st.buf = pipes[(i/depth)%len(pipes)]
		st.start, st.end = 0, len(st.buf)
		c.out = c.out[:0]
		for st.start < st.end { // 48 commands are two parseBatch rounds
			if err := st.parseBatch(); err != nil || len(st.cmds) == 0 {
				b.Fatalf("parsed %d commands, err %v", len(st.cmds), err)
			}
			if len(st.keys) > 1 {
				s.store.Prefetch(st.keys, st.hashes[:len(st.keys)])
			}
			if _, ran, _ := s.runBatch(c, st); !ran {
				b.Fatal("nothing ran")
			}
		}
	}
	if cpu := processCPUNs() - cpu0; cpu > 0 {
		b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
	}
	b.StopTimer()
	if c.out[0] != '*' {
		b.Fatalf("reply %q", c.out)
	}
}
