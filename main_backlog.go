package main

import (
	"time"

	"github.com/celld/celld/store"
)

// A persistence backlog is charged to the memory bound.
//
// While the disk refuses writes (full, read-only, gone) the flusher keeps
// every change it drained in its pending set and retries (persist/
// flusher.go); the server keeps deciding from memory. Under a spray of
// unique keys at the bound every key sprayed adds a pending op (~340 B:
// persist/flusher.go: pendingHeap), evicted or not, and nothing counted it:
// measured at --maxmemory 16mb, volatile-ttl, on a 24 MB tmpfs that filled
// after 8 s, used_memory stayed at 16.8 MB while pending_bytes reached
// 294 MB and RSS 262 MB after 32 s, growing ~7 MB/s without bound.
//
// So the backlog's estimate (Status.PendingBytes), where it passes the
// share of the bound set aside for persistence's buffers (persistReserve,
// already counted), is charged to the store as backlog memory
// (store.SetBacklogMemory): counted in used_memory, and over the bound it
// makes new keys fail with -OOM while existing keys are still decided. It
// never makes keys evicted (evicting a key that reached the disk adds its
// deletion to the backlog; docs/memory.md). When the disk comes back and
// the backlog is written, the charge falls to zero and new keys are taken
// again.

// backlogCharge is the backlog memory charged to a bound of n bytes for a
// pending set of pending bytes: what passes the reserve; nothing without
// a bound.
func backlogCharge(n, pending int64) int64 {
	if n <= 0 {
		return 0
	}
	return max(pending-persistReserve(n), 0)
}

// followBacklog re-reads the backlog every period and charges it to st
// (backlogCharge). It runs until stop is closed. Cost: one Status read (a
// mutex) and two atomic operations per period.
func followBacklog(st *store.Store, pending func() int64, period time.Duration, stop <-chan struct{}) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		st.SetBacklogMemory(backlogCharge(st.MaxMemory(), pending()))
	}
}
