package store

import (
	"fmt"
	"math/rand"
	"runtime"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/celld/celld/gcra"
)

// BenchmarkReplDrain is the async leader's store-side cost per CL.THROTTLE
// write: Throttle on random keys of 100,000 (as bench/repl.sh), with the
// effect log off, or on and drained every 256 writes (about a 1 ms round
// at P16) into an encoder that copies each change's key and TAT. ns/op is
// per write, drain included; the difference between "on" and "off" is
// replication's share. cpu-ns/op is the benchmark thread's own CPU time
// per write (RUSAGE_THREAD), steadier than ns/op on a shared machine;
// drain-ns/key is the median over the drains of one DrainRepl's time per
// key it passed (a median leaves out the drains the machine preempted).
func BenchmarkReplDrain(b *testing.B) {
	for _, on := range []bool{false, true} {
		b.Run(map[bool]string{false: "off", true: "on"}[on], func(b *testing.B) {
			s := New(Options{})
			lim, _ := gcra.NewLimit(1_000_000, 1, 1)
			keys := make([][]byte, 100_000)
			for i := range keys {
				keys[i] = []byte(fmt.Sprintf("ok:%012d", i))
				s.Throttle(keys[i], lim, 1, 1e18)
			}
			s.SetRepl(on)
			rng := rand.New(rand.NewSource(1))
			order := make([]int32, 1<<16)
			for i := range order {
				order[i] = int32(rng.Intn(len(keys)))
			}
			var enc []byte
			drain := func(c Change) {
				enc = append(enc[:0], c.Key...)
				enc = append(enc, byte(c.TAT), byte(c.ExpireAtMs))
			}
			now := int64(1e18)
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			var per []float64
			t0 := threadCPU()
			b.ResetTimer()
			for i := range b.N {
				now += 1000
				s.Throttle(keys[order[i&(len(order)-1)]], lim, 1, now)
				if i&255 == 255 {
					d0 := time.Now()
					if n := s.DrainRepl(drain); n > 0 {
						per = append(per, float64(time.Since(d0).Nanoseconds())/float64(n))
					}
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(threadCPU()-t0)/float64(b.N), "cpu-ns/op")
			if len(per) > 0 {
				slices.Sort(per)
				b.ReportMetric(per[len(per)/2], "drain-ns/key")
			}
		})
	}
}

// threadCPU is the calling thread's CPU time (user + system), ns.
func threadCPU() int64 {
	var ru syscall.Rusage
	syscall.Getrusage(1, &ru) // RUSAGE_THREAD
	return ru.Utime.Nano() + ru.Stime.Nano()
}
