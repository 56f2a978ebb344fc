package repl

import (
	"fmt"
	"testing"
	"time"

	"github.com/celld/celld/store"
)

// TestResyncTakesLeadersState: once a follower has synced from its leader
// in a term, everything it holds came from that leader, so a resync
// (SWAPDB closes the links; a dropped link does the same) must take the
// leader's current state of every key, not merge TATs by the larger one:
// after SWAPDB 0 1 the leader's db0 key holds db1's smaller TAT, and a
// numeric string written meanwhile (SET k 1862 is stored as the plain
// value 1862, the same as a TAT of 1862) is smaller than the TAT it
// replaced. Merged by max, the follower kept both older values for good.
func TestResyncTakesLeadersState(t *testing.T) {
	ld, fd := newDBs(t), newDBs(t)
	leader, follower := newNode(t, ld, Async), newNode(t, fd, Async)
	leader.Lead(0, 7)
	follower.Follow(0, 7, leader.ReplAddr())
	eventually(t, "follower synced", func() bool { return follower.Status().Synced })

	nowMs := time.Now().UnixMilli()
	far := uint64(time.Now().Add(time.Minute).UnixNano())
	put := func(db int, key string, tat uint64) {
		ld.DB(db).Update([]byte(key), nowMs, func(store.Value, bool) (store.Value, store.Action) {
			return store.Value{TAT: tat, ExpireAtMs: nowMs + 120_000}, store.Put
		})
	}
	put(0, "k", far)
	put(1, "k", far-1e9)
	put(2, "n", far)
	same := func() bool { return fmt.Sprint(dump(fd)) == fmt.Sprint(dump(ld)) }
	eventually(t, "follower mirrors leader", same)

	put(2, "n", 1862) // SET n 1862, in the round of the swap or just before
	ld.Swap(0, 1)     // the leader closes its followers' links: they resync
	deadline := time.Now().Add(5 * time.Second)
	for !same() {
		if time.Now().After(deadline) {
			t.Fatalf("follower diverged after a resync:\nleader   %q\nfollower %q", dump(ld), dump(fd))
		}
		time.Sleep(2 * time.Millisecond)
	}
}
