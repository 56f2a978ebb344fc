package server

import (
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"testing"
	"time"
)

// otherPauses is the number of stop-the-world pauses the runtime made for
// anything but the collector (ReadMemStats among them) so far.
func otherPauses(t *testing.T) uint64 {
	t.Helper()
	s := []metrics.Sample{{Name: "/sched/pauses/total/other:seconds"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindFloat64Histogram {
		t.Skip("runtime has no /sched/pauses/total/other:seconds")
	}
	var n uint64
	for _, c := range s[0].Value.Float64Histogram().Counts {
		n += c
	}
	return n
}

// TestInfoMemoryNoStopTheWorld: INFO memory, which monitoring polls and
// which runs on an event loop, reads the Go heap's figures without
// stopping the world (runtime.ReadMemStats did, and under a key spray its
// pauses were the event loop's longest), and still reports them.
func TestInfoMemoryNoStopTheWorld(t *testing.T) {
	s, _ := startServer(t, nil)
	runtime.GC()
	before := otherPauses(t)
	var lines []string
	for range 20 {
		lines = s.infoMemory(time.Now())
	}
	if after := otherPauses(t); after != before {
		t.Errorf("20 INFO memory calls stopped the world %d times", after-before)
	}
	field := func(name string) uint64 {
		for _, l := range lines {
			if v, ok := strings.CutPrefix(l, name+":"); ok {
				n, err := strconv.ParseUint(v, 10, 64)
				if err != nil {
					t.Fatalf("%s: %v", l, err)
				}
				return n
			}
		}
		t.Fatalf("INFO memory has no %s", name)
		return 0
	}
	alloc, sys, gcs := field("go_heap_alloc"), field("go_heap_sys"), field("go_gc_cycles")
	if alloc == 0 || sys < alloc {
		t.Errorf("go_heap_alloc %d, go_heap_sys %d: want 0 < alloc <= sys", alloc, sys)
	}
	runtime.GC()
	lines = s.infoMemory(time.Now())
	if n := field("go_gc_cycles"); n <= gcs {
		t.Errorf("go_gc_cycles %d after a collection, %d before", n, gcs)
	}
	if field("used_memory_rss") == 0 {
		t.Error("used_memory_rss is 0")
	}
}
