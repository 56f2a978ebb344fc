package ha

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/celld/celld/cluster"
	"github.com/celld/celld/ha/etcdtest"
)

// fakeImporter is a recorder that imports as far as reach allows: ""
// never gets anywhere, "synced" never seals, "sealed" finishes.
type fakeImporter struct {
	*recorder
	mu     sync.Mutex
	reach  string
	tasks  []ImportTask // the last Import's
	finals []ImportTask // every final task seen
	ev     chan struct{}
}

func (f *fakeImporter) Import(tasks []ImportTask) {
	f.mu.Lock()
	f.tasks = append([]ImportTask(nil), tasks...)
	for _, t := range tasks {
		if t.Final {
			f.finals = append(f.finals, t)
		}
	}
	f.mu.Unlock()
	select {
	case f.ev <- struct{}{}:
	default:
	}
}

func (f *fakeImporter) ImportStates() []ImportState {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []ImportState
	for _, t := range f.tasks {
		st := "connecting"
		switch {
		case f.reach == "sealed" && t.Final:
			st = "sealed"
		case f.reach == "synced" || f.reach == "sealed":
			st = "synced"
		}
		out = append(out, ImportState{ID: t.ID, State: st, Keys: 3})
	}
	return out
}

func (f *fakeImporter) ImportEvents() <-chan struct{} { return f.ev }

// TestMoveSlotsStreamingFlow drives move-slots' streaming flow against real
// etcd and real ha nodes whose importer is a fake: a target that never
// copies is rolled back in phase copy (the source kept serving), one that
// copies but never seals is rolled back in phase final (the slots go back
// to the source), one that seals gets the slots, and a move whose tool
// died is resumed by running it again; the target is told
// the source leader's replication address and epoch, and no two nodes
// serve a slot at once.
func TestMoveSlotsStreamingFlow(t *testing.T) {
	e := etcdtest.Start(t)
	ms := members("a", "b")
	doc, _ := InitDoc(2, 0, ms)
	cli := newClient(t, e)
	if err := CreateDoc(context.Background(), cli, "mv", doc); err != nil {
		t.Fatal(err)
	}
	nodes := map[string]*testNode{}
	var target *fakeImporter
	for _, m := range ms {
		c := newClient(t, e)
		rec := &recorder{}
		var rep Replicator = rec
		if m.ID == "b" {
			target = &fakeImporter{recorder: rec, ev: make(chan struct{}, 1)}
			rep = target
		}
		n, err := Start(Config{Client: c, Cluster: "mv", NodeID: m.ID, Addr: m.Addr, TTL: 2 * time.Second,
			Apply: rec.apply, Replicator: rep, Log: slog.New(slog.NewTextHandler(rec, &slog.HandlerOptions{Level: slog.LevelDebug}))})
		if err != nil {
			t.Fatal(err)
		}
		tn := &testNode{m.ID, c, n, rec}
		nodes[m.ID] = tn
		t.Cleanup(tn.n.Close)
	}
	waitFor(t, "leaders", 15*time.Second, func() bool {
		a, ok1 := leaderOf(nodes, 0, nil)
		b, ok2 := leaderOf(nodes, 16383, nil)
		return ok1 && ok2 && a == "a" && b == "b"
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	owner := func(s int) int {
		d, _, err := ReadDoc(ctx, cli, "mv")
		if err != nil {
			t.Fatal(err)
		}
		if len(d.Moves) != 0 {
			t.Fatalf("moves left in the document: %+v", d.Moves)
		}
		return d.owner(s)
	}

	// 1. The target never copies: rolled back in phase copy.
	if _, _, err := MoveSlotsStreaming(ctx, cli, "mv", 0, 99, 1, 500*time.Millisecond); !errors.Is(err, ErrRolledBack) {
		t.Fatalf("a target that never copies: %v", err)
	}
	if o := owner(50); o != 0 {
		t.Fatalf("after a rollback in phase copy slot 50 is in shard %d", o)
	}
	target.mu.Lock()
	if len(target.finals) != 0 {
		t.Errorf("the target was told to finish a move it never copied: %+v", target.finals)
	}
	target.mu.Unlock()

	// 2. It copies but never seals: rolled back in phase final.
	target.mu.Lock()
	target.reach = "synced"
	target.mu.Unlock()
	if _, _, err := MoveSlotsStreaming(ctx, cli, "mv", 0, 99, 1, 500*time.Millisecond); !errors.Is(err, ErrRolledBack) {
		t.Fatalf("a target that never seals: %v", err)
	}
	if o := owner(50); o != 0 {
		t.Fatalf("after a rollback in phase final slot 50 is in shard %d", o)
	}
	waitFor(t, "a serves slot 0 again", 5*time.Second, func() bool {
		l, ok := leaderOf(nodes, 0, nil)
		return ok && l == "a"
	})

	// 3. It seals: the slots are b's.
	target.mu.Lock()
	target.reach, target.finals = "sealed", nil
	target.mu.Unlock()
	d, rep, err := MoveSlotsStreaming(ctx, cli, "mv", 0, 99, 1, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("move: %+v", rep)
	if s := d.Shards[1].Slots; len(s) != 2 || s[0] != (cluster.SlotRange{First: 0, Last: 99}) || len(d.Moves) != 0 {
		t.Fatalf("document: %s", d.Marshal())
	}
	waitFor(t, "b serves slot 0", 5*time.Second, func() bool {
		l, ok := leaderOf(nodes, 0, nil)
		return ok && l == "b"
	})
	target.mu.Lock()
	finals := target.finals
	target.mu.Unlock()
	if len(finals) == 0 {
		t.Fatal("the target was never told to finish")
	}
	aRepl, _ := DefaultReplAddr(ms[0].Addr)
	if f := finals[0]; f.First != 0 || f.Last != 99 || f.Source != aRepl || f.Epoch == 0 {
		t.Errorf("the target's task: %+v (want slots 0-99 from %s)", f, aRepl)
	}
	// No two nodes served a moved slot at once.
	checkNoOverlap(t, nodes, 0)
	checkNoOverlap(t, nodes, 99)
	if rep.Keys != 3 {
		t.Errorf("report: %+v (the importer said 3 keys)", rep)
	}
	// 4. A move whose tool died in phase final (recorded, the slots
	// unowned) is resumed by the same command.
	if _, err := UpdateDoc(ctx, cli, "mv", func(d *Doc) error {
		d.Moves = append(d.Moves, Move{ID: 42, First: 100, Last: 199, From: 0, To: 1, Phase: "final"})
		d.Unassign(100, 199)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	d, _, err = MoveSlotsStreaming(ctx, cli, "mv", 100, 199, 1, 10*time.Second)
	if err != nil {
		t.Fatalf("resume: %v", err)
	}
	if s := d.Shards[1].Slots; len(s) != 2 || s[0] != (cluster.SlotRange{First: 0, Last: 199}) || len(d.Moves) != 0 {
		t.Fatalf("after the resumed move: %s", d.Marshal())
	}
	target.mu.Lock()
	resumed := false
	for _, f := range target.finals {
		resumed = resumed || f.ID == 42
	}
	target.mu.Unlock()
	if !resumed {
		t.Error("the target never imported the resumed move")
	}

	// A move of slots held by two shards, or already held, is refused.
	if _, _, err := MoveSlotsStreaming(ctx, cli, "mv", 150, 250, 0, time.Second); !errors.Is(err, ErrBadCommand) {
		t.Errorf("a range over two shards: %v", err)
	}
	if _, _, err := MoveSlotsStreaming(ctx, cli, "mv", 0, 99, 1, time.Second); !errors.Is(err, ErrBadCommand) {
		t.Errorf("a move to the shard that holds the slots: %v", err)
	}
}
