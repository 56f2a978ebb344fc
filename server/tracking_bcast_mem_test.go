package server

import (
	"strconv"
	"testing"
)

// TestTrackingBcastPrefixesCountInUsedMemory (hostile15b finding): BCAST prefixes are held per client for as long as it tracks,
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
	// FLUSHALL forgets tracked keys, not a client's prefixes.
	trk := &s.ext.trk
	trk.mu.Lock()
	keysMem := trk.mem - trk.pmem // the fixture's tracked keys
	trk.flushLocked(s)
	trk.mu.Unlock()
	if now := s.store.OverheadMemory() - before; now != got-keysMem {
		t.Fatalf("after a flush the overhead moved by %d, want %d (the keys' %d given back, the prefixes kept)", now, got-keysMem, keysMem)
	}
	// Turning tracking off gives the charge back.
	tr.out = tr.out[:0]
	s.dispatchLookup(tr, bargs("CLIENT", "TRACKING", "OFF"))
	if string(tr.out) != "+OK\r\n" {
		t.Fatalf("CLIENT TRACKING OFF: %q", tr.out)
	}
	if now := s.store.OverheadMemory() - before; now != -keysMem {
		t.Fatalf("after CLIENT TRACKING OFF the overhead moved by %d from where it started, want %d (the flushed keys only)", now, -keysMem)
	}
}
