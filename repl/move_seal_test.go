package repl

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/celld/celld/gcra"
)

// TestSlotMoveSealWaitsForRouted: a command that passed the source's
// routing check before its topology gave the slots away, and then stalled
// before its store write for far longer than the old 20 ms seal grace, is
// still ahead of the seal: the source seals only once its server's
// SetRouted wait (server.WaitRouted) says every such command has written,
// so when the target reports "sealed" it holds that write. With the grace
// alone the seal comes first, and the target would serve the key without
// the admission (one admission granted twice).
func TestSlotMoveSealWaitsForRouted(t *testing.T) {
	sd, td := newDBs(t), newDBs(t)
	src, dst := newNode(t, sd, Async), newNode(t, td, Async)
	var serving atomic.Bool
	serving.Store(true)
	src.SetServes(func(s int) bool { return serving.Load() && s >= moveFirst && s <= moveLast })
	written := make(chan struct{}) // the stalled command's store write is made
	src.SetRouted(func(ctx context.Context) error {
		select {
		case <-written:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	src.Lead(0, 5)
	dst.Lead(1, 9)
	fillKinds(t, sd, "a", 20)
	dst.Import([]ImportTask{{ID: 1, First: moveFirst, Last: moveLast, Source: src.ReplAddr(), Epoch: 5}})
	eventually(t, "import synced", func() bool { return importState(dst, 1) == "synced" })
	var late string
	for i := 0; late == ""; i++ {
		if k := fmt.Sprintf("late:%d", i); inMove(k) {
			late = k
		}
	}

	dst.Import([]ImportTask{{ID: 1, First: moveFirst, Last: moveLast, Source: src.ReplAddr(), Epoch: 5, Final: true}})
	serving.Store(false) // the new topology reached the source's server
	sealedSeen := make(chan struct{})
	lim, _ := gcra.NewLimit(4, 10, 60)
	go func() {
		// The stalled command: it writes once the target reports
		// sealed, or after 10 times sealGrace, whichever is first.
		select {
		case <-sealedSeen:
		case <-time.After(10 * sealGrace):
		}
		sd.DB(0).Throttle([]byte(late), lim, 1, time.Now().UnixNano())
		close(written)
	}()
	eventually(t, "sealed", func() bool { return importState(dst, 1) == "sealed" })
	got := dumpSlots(td, true)
	close(sealedSeen)
	<-written
	if want := dumpSlots(sd, true); !slices.Equal(got, want) {
		t.Fatalf("sealed without the stalled command's write: target %d keys, source %d\n%s", len(got), len(want), diffLines(got, want))
	}
}
