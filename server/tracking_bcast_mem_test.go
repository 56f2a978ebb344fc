package server

import (
	"strconv"
	"testing"
)

// TestTrackingBcastPrefixesCountInUsedMemory (hostile15b finding, fails
// today): BCAST prefixes are held per client for as long as it tracks,
// like the tracking table, and Redis counts them in used_memory (its
// prefix rax). Process figures: 40 clients x 500 prefixes of ~1 KB raised
// celld's go_heap_alloc 1.4 MB -> 24.7 MB with used_memory unchanged
// (265,288) and SET still OK under --maxmemory 2mb; redis-server 7.0.15
// went 0.91 MB -> 46.5 MB and answered -OOM.
func TestTrackingBcastPrefixesCountInUsedMemory(t *testing.T) {
	s, _ := trackingFixture(t, "tracked")
	tr := &client{srv: s, id: 97, proto: 3, resp3: true, multiLen: -1, authed: true}
	before := s.store.OverheadMemory()
	args := []string{"CLIENT", "TRACKING", "ON", "BCAST"}
	const n, plen = 500, 1000
	pad := make([]byte, plen)
	for i := range pad {
		pad[i] = 'x'
	}
	for i := range n {
		args = append(args, "PREFIX", "p"+strconv.Itoa(i)+"_"+string(pad))
	}
	s.dispatchLookup(tr, bargs(args...))
	if string(tr.out) != "+OK\r\n" {
		t.Fatalf("CLIENT TRACKING ON BCAST: %q", tr.out)
	}
	got := s.store.OverheadMemory() - before
	if got < n*plen {
		t.Fatalf("%d BCAST prefixes of %d bytes: used_memory overhead grew by %d bytes, want >= %d", n, plen, got, n*plen)
	}
}
