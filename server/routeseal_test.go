package server

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/celld/celld/store"
)

// stallWrite holds x.stallwrite between its routing check (already passed
// when its handler runs) and its store write: the handler says it started,
// then waits to be released. Set by the test that uses it.
var stallWrite struct {
	started, release chan struct{}
}

func init() {
	Register(Command{
		Name: "x.stallwrite", Arity: 2, Flags: "write", FirstKey: 1, LastKey: 1, Step: 1,
		ACL: "write", Group: "generic", Since: "1.0.0", Summary: "Test: a write stalled after its routing check.",
		Run: func(x *Ctx) {
			stallWrite.started <- struct{}{}
			<-stallWrite.release
			x.Store().Put(x.Args()[1], store.Value{TAT: 7}, time.Now().UnixMilli(), 0, false)
			x.Int(1)
		},
	})
}

// TestWaitRoutedWaitsForCommandInFlight: a command that passed its routing
// check under a topology that gave this node its slot, and then stalls
// before its store write (a descheduled goroutine, for as long as it
// takes), holds WaitRouted up after the topology took the slot away; when
// WaitRouted returns, the write is in the store. Commands after the change
// are refused (MOVED); with nothing in flight WaitRouted returns at
// once.
func TestWaitRoutedWaitsForCommandInFlight(t *testing.T) {
	stallWrite.started, stallWrite.release = make(chan struct{}), make(chan struct{})
	s, addr := startServerConfig(t, nil, Config{Cluster: haTopology(t, 0, false)}) // owns 0-8191
	var once sync.Once
	release := func() { once.Do(func() { close(stallWrite.release) }) }
	t.Cleanup(release) // before the server's shutdown, on failure too
	if err := s.WaitRouted(context.Background()); err != nil {
		t.Fatalf("nothing in flight: %v", err)
	}
	a := keyIn(0, 8191)
	r := dial(t, addr)
	r.send([]string{"x.stallwrite", a})
	<-stallWrite.started // routed by the old topology, not written yet

	s.SetTopology(haTopology(t, 2, false)) // slot of a now belongs to n0, not to this node (n2)
	done := make(chan error, 1)
	go func() { done <- s.WaitRouted(context.Background()) }()
	select {
	case err := <-done:
		t.Fatalf("WaitRouted returned (%v) while a command routed by the old topology had not written", err)
	case <-time.After(100 * time.Millisecond): // a stall longer than the old 20 ms seal grace
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.WaitRouted(ctx); err != context.Canceled {
		t.Fatalf("WaitRouted with a cancelled context and a command in flight: %v", err)
	}
	release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if v, ok := s.dbs.DB(0).Get([]byte(a), time.Now().UnixMilli()); !ok || v.TAT != 7 {
		t.Fatalf("WaitRouted returned before the command's store write (%v %v)", v, ok)
	}
	if got, err := r.reply(); err != nil || got != ":1" {
		t.Fatalf("the stalled command's reply: %q %v", got, err)
	}
	if got := roundTrip(t, r, "set", a, "1"); len(got) < 6 || got[:6] != "-MOVED" {
		t.Fatalf("after the change: %q, want MOVED", got)
	}
	if err := s.WaitRouted(context.Background()); err != nil {
		t.Fatal(err)
	}
}
