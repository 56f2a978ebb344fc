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
func BenchmarkBatchMThrottle3(b *testing.B) {
	s, c := newDispatchFixture(b)
	const depth, nkeys = 16, 100_000
	key := func(p string, k int) string { return fmt.Sprintf("%s:%012d", p, k) }
	var pipes [][]byte
	for p := 0; p < 64; p++ {
		var buf []byte
		for i := 0; i < depth; i++ {
			k := (p*depth + i) * 7919 % nkeys
			buf = fmt.Appendf(buf, "*16\r\n$12\r\nCL.MTHROTTLE\r\n")
			for _, pre := range []string{"a", "b", "c"} {
				kk := key(pre, k)
				buf = fmt.Appendf(buf, "$%d\r\n%s\r\n$2\r\n15\r\n$2\r\n30\r\n$2\r\n60\r\n$1\r\n1\r\n", len(kk), kk)
			}
		}
		pipes = append(pipes, buf)
	}
	for k := 0; k < nkeys; k++ { // fill the keyspace
		for _, pre := range []string{"a", "b", "c"} {
			c.out = c.out[:0]
			s.dispatchLookup(c, bargs("CL.THROTTLE", key(pre, k), "15", "30", "60"))
		}
	}
	st := &connState{hashes: make([]uint64, max(maxBatchCmds, maxPrefetchKeys))}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i += depth {
		st.buf = pipes[(i/depth)%len(pipes)]
		st.start, st.end = 0, len(st.buf)
		c.out = c.out[:0]
		if err := st.parseBatch(); err != nil || len(st.cmds) != depth {
			b.Fatalf("parsed %d commands, err %v", len(st.cmds), err)
		}
		s.store.Prefetch(st.keys, st.hashes[:len(st.keys)])
		if _, ran, _ := s.runBatch(c, st); !ran {
			b.Fatal("nothing ran")
		}
	}
	b.StopTimer()
	if c.out[0] != '*' {
		b.Fatalf("reply %q", c.out)
	}
}
