package store

import (
	"errors"
	"sync"
	"testing"

	"github.com/celld/celld/gcra"
)

// TestAttack16UnreadableErrUnderLock: Throttle, ThrottleIn and Peek on a
// key that is not a TAT read the entry's flags for their error while the
// shard is locked, not after unlocking it: another writer of the shard
// (here a SET of the same key, in celld the persistence drain clearing
// flagDirty) changes them meanwhile. The race detector reports the read
// after the unlock (go test -race; seen with a race-built celld under
// TestProcessAttack16DrainMixedKinds: store.go's Throttle against
// DrainShardsViewNumbers); the error is one of the two the key's kinds
// give.
func TestAttack16UnreadableErrUnderLock(t *testing.T) {
	s := New(Options{TrackDirty: true})
	lim := mustLimit(t, 10, 1, 1)
	now := t0ms
	key := []byte("text")
	putValue(s, "text", now, Value{Raw: "abc", Invalid: true})
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			putValue(s, "text", now, Value{Raw: "abc" + string(rune('a'+i%26)), Invalid: true})
		}
	}()
	for range 2000 {
		for _, call := range []func() error{
			func() error { _, err := s.Throttle(key, lim, 1, now*1e6); return err },
			func() error { _, err := s.ThrottleIn(gcra.UnitSeconds, key, lim, 1, now*1e6); return err },
			func() error { _, err := s.Peek(gcra.UnitSeconds, key, lim, 1, now*1e6); return err },
		} {
			if err := call(); !errors.Is(err, ErrInvalidValue) {
				t.Fatalf("on an invalid text: %v, want ErrInvalidValue", err)
			}
		}
	}
	close(stop)
	wg.Wait()
}
