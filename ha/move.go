package ha

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/celld/celld/cluster"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Slot moves that stream keys (issue #26 item 6, docs/ha-slot-moves.md).
//
// `celld cluster move-slots FIRST-LAST --to SHARD` records the move in the
// topology document (Doc.Moves, phase "copy"). The leader of the target
// shard sees it and pulls the slots' keys from the source shard's leader
// over the replication port (a snapshot merged by largest TAT, then the
// source's live effects on those slots), and reports "synced" in its
// registration. The tool then takes the slots from the source (phase
// "final": they answer CLUSTERDOWN, which clients retry); the target asks
// the source to seal; the source, once it routes none of the slots, sends
// its last effects on them and "sealed"; the target reports it, and the
// tool gives the slots to the target by compare-and-swap and drops the
// record. The pause per slot is the final phase: one watch round trip, the
// source's seal (its commands in flight, then one drain round) and one
// registration round trip.
//
// A move that cannot finish in time is rolled back: in phase copy the
// record is dropped (the source never stopped serving); in phase final the
// slots are given back to the source, which never lost their state (the
// target never served them). Running the same move-slots again resumes a
// move whose tool died.

// Move is a slot move under way: slots First..Last, from shard From to
// shard To. Phase "copy": the source still serves them while the target
// copies; "final": nobody serves them until the target has the source's
// last effects. ID names the move (its importers and reports).
type Move struct {
	ID    int64  `json:"id"`
	First int    `json:"first"`
	Last  int    `json:"last"`
	From  int    `json:"from"`
	To    int    `json:"to"`
	Phase string `json:"phase"`
}

func (d *Doc) validateMoves() error {
	for i, m := range d.Moves {
		if m.From < 0 || m.From >= len(d.Shards) || m.To < 0 || m.To >= len(d.Shards) || m.From == m.To ||
			m.First < 0 || m.Last >= cluster.SlotCount || m.First > m.Last || (m.Phase != "copy" && m.Phase != "final") {
			return fmt.Errorf("%w: move %d: %+v", ErrBadDoc, i, m)
		}
		for _, o := range d.Moves[:i] {
			if o.ID == m.ID || o.First <= m.Last && m.First <= o.Last {
				return fmt.Errorf("%w: moves %d and %d overlap", ErrBadDoc, o.ID, m.ID)
			}
		}
	}
	return nil
}

// moveIndex is the index in d.Moves of the move id, or -1.
func (d *Doc) moveIndex(id int64) int {
	for i, m := range d.Moves {
		if m.ID == id {
			return i
		}
	}
	return -1
}

// importTasks are the moves into shard (which this node leads in v) whose
// source shard has a leader now.
func importTasks(v *view, shard int) []ImportTask {
	var out []ImportTask
	for _, m := range v.doc.Moves {
		if m.To != shard {
			continue
		}
		l, ok := v.leaders[m.From]
		if !ok {
			continue
		}
		si, mem := v.doc.Find(l.id)
		if mem == nil || si != m.From {
			continue
		}
		out = append(out, ImportTask{ID: m.ID, First: m.First, Last: m.Last, Source: mem.ReplAddr,
			Epoch: uint64(l.rev), Final: m.Phase == "final"})
	}
	return out
}

// MoveReport is what a streaming move measured: the keys of the target's
// last snapshot and how long it took, the pause (from the slots being
// taken from the source to their being given to the target, as the tool
// sees it) and the whole move.
type MoveReport struct {
	Keys   int64
	CopyMs float64
	Pause  time.Duration
	Total  time.Duration
}

// ErrRolledBack: the move did not finish within its time and was undone;
// the slots are served by their source shard, with their state.
var ErrRolledBack = errors.New("ha: the slot move was rolled back")

// MoveSlotsStreaming moves slots first..last, all held by one shard, to
// shard to with their keys (see the top of this file). Each of its two
// waits (the target synced, the target sealed) is bounded by wait; a wait
// that ends rolls the move back (ErrRolledBack). A move of the same slots
// to the same shard already recorded (its tool died) is resumed.
func MoveSlotsStreaming(ctx context.Context, cli *clientv3.Client, clusterName string, first, last, to int, wait time.Duration) (*Doc, MoveReport, error) {
	start := time.Now()
	var rep MoveReport
	var mv Move
	_, _, err := updateDoc(ctx, cli, clusterName, func(d *Doc) error {
		if to < 0 || to >= len(d.Shards) || len(d.Shards[to].Members) == 0 {
			return fmt.Errorf("%w: shard %d does not exist or has no members", ErrBadCommand, to)
		}
		if first < 0 || last >= cluster.SlotCount || first > last {
			return fmt.Errorf("%w: slot range %d-%d", ErrBadCommand, first, last)
		}
		for _, m := range d.Moves {
			if m.First == first && m.Last == last && m.To == to {
				mv = m // resume
				return nil
			}
		}
		from := -1
		for s := first; s <= last; s++ {
			o := d.owner(s)
			switch {
			case o < 0:
				return fmt.Errorf("%w: slot %d is unowned: give it a shard with move-slots --no-keys", ErrBadCommand, s)
			case from >= 0 && o != from:
				return fmt.Errorf("%w: slots %d-%d are held by shards %d and %d: move each shard's part on its own", ErrBadCommand, first, last, from, o)
			}
			from = o
		}
		if from == to {
			return fmt.Errorf("%w: shard %d already holds slots %d-%d", ErrBadCommand, to, first, last)
		}
		mv = Move{ID: time.Now().UnixNano(), First: first, Last: last, From: from, To: to, Phase: "copy"}
		d.Moves = append(d.Moves, mv)
		return nil
	})
	if err != nil {
		return nil, rep, err
	}
	rollback := func(why error) error {
		rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := UpdateDoc(rctx, cli, clusterName, func(d *Doc) error {
			i := d.moveIndex(mv.ID)
			if i < 0 {
				return nil
			}
			m := d.Moves[i]
			d.Moves = append(d.Moves[:i], d.Moves[i+1:]...)
			if m.Phase == "final" {
				return d.MoveSlots(m.First, m.Last, m.From)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("%v; rolling back failed too (%v): run move-slots again", why, err)
		}
		return fmt.Errorf("%w: %v", ErrRolledBack, why)
	}
	if mv.Phase == "copy" {
		st, err := waitImport(ctx, cli, clusterName, mv, wait, "synced", "sealed")
		if err != nil {
			return nil, rep, rollback(fmt.Errorf("the target did not copy slots %d-%d: %w", first, last, err))
		}
		rep.Keys, rep.CopyMs = st.Keys, st.CopyMs
		_, _, err = updateDoc(ctx, cli, clusterName, func(d *Doc) error {
			i := d.moveIndex(mv.ID)
			if i < 0 {
				return fmt.Errorf("%w: move %d is no longer recorded", ErrConflict, mv.ID)
			}
			d.Moves[i].Phase = "final"
			d.Unassign(mv.First, mv.Last)
			return nil
		})
		if err != nil {
			return nil, rep, err
		}
		mv.Phase = "final"
	}
	paused := time.Now()
	if _, err := waitImport(ctx, cli, clusterName, mv, wait, "sealed"); err != nil {
		return nil, rep, rollback(fmt.Errorf("the target did not get the last changes of slots %d-%d: %w", first, last, err))
	}
	d, err := UpdateDoc(ctx, cli, clusterName, func(d *Doc) error {
		i := d.moveIndex(mv.ID)
		if i < 0 {
			return fmt.Errorf("%w: move %d is no longer recorded", ErrConflict, mv.ID)
		}
		d.Moves = append(d.Moves[:i], d.Moves[i+1:]...)
		return d.MoveSlots(mv.First, mv.Last, mv.To)
	})
	if err != nil {
		return nil, rep, err
	}
	rep.Pause, rep.Total = time.Since(paused), time.Since(start)
	return d, rep, nil
}

// owner is the shard holding slot s, or -1.
func (d *Doc) owner(s int) int {
	for i, sh := range d.Shards {
		for _, r := range sh.Slots {
			if s >= r.First && s <= r.Last {
				return i
			}
		}
	}
	return -1
}

// waitImport waits, at most wait, until the current leader of mv's target
// shard reports mv in one of the states. It re-reads on every change under
// the cluster's keys (a watch: the pause does not wait for a poll), and
// every 200 ms in case the watch breaks.
func waitImport(ctx context.Context, cli *clientv3.Client, clusterName string, mv Move, wait time.Duration, states ...string) (ImportState, error) {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	wch := cli.Watch(ctx, prefix(clusterName), clientv3.WithPrefix())
	last := "no leader"
	for {
		st, seen, err := importState(ctx, cli, clusterName, mv)
		if err == nil && seen != "" {
			last = seen
			for _, s := range states {
				if st.State == s {
					return st, nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return ImportState{}, fmt.Errorf("%s after %v (%w)", last, wait, ctx.Err())
		case _, ok := <-wch:
			if !ok {
				wch = nil
			}
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// importState reads the registration of the leader of mv.To and its state
// of mv; seen describes what was found (for errors).
func importState(ctx context.Context, cli *clientv3.Client, clusterName string, mv Move) (ImportState, string, error) {
	n := &Node{cfg: Config{Client: cli, Cluster: clusterName}}
	v, err := n.read(ctx)
	if err != nil {
		return ImportState{}, "", err
	}
	l, ok := v.leaders[mv.To]
	if !ok {
		return ImportState{}, fmt.Sprintf("shard %d has no leader", mv.To), nil
	}
	resp, err := cli.Get(ctx, nodeKey(clusterName, l.id))
	if err != nil {
		return ImportState{}, "", err
	}
	if len(resp.Kvs) == 0 {
		return ImportState{}, fmt.Sprintf("leader %s is not registered", l.id), nil
	}
	var r registration
	if err := json.Unmarshal(resp.Kvs[0].Value, &r); err != nil {
		return ImportState{}, "", err
	}
	for _, s := range r.Imports {
		if s.ID == mv.ID {
			return s, fmt.Sprintf("leader %s: %s", l.id, s.State), nil
		}
	}
	return ImportState{}, fmt.Sprintf("leader %s has not started the import", l.id), nil
}

// describeMoves is `show`'s line for the moves under way.
func describeMoves(d *Doc) string {
	var parts []string
	for _, m := range d.Moves {
		parts = append(parts, fmt.Sprintf("%d-%d %d→%d (%s)", m.First, m.Last, m.From, m.To, m.Phase))
	}
	return strings.Join(parts, ", ")
}
