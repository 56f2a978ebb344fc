package repl

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"github.com/celld/celld/cluster"
	"github.com/celld/celld/store"
)

// Slot moves (issue #26 item 6, docs/ha-slot-moves.md). The leader of the
// shard that receives slots (the target) pulls them from the leader of the
// shard that gives them (the source) over the source's replication port:
//
//	M  move hello  T→S  "celld-repl/1" epoch:uvarint first:uvarint last:uvarint
//	W  welcome     S→T  epoch:uvarint
//	S  snapshot    S→T  entry*          (the keys of slots first..last only)
//	Z  synced      S→T  seq:uvarint
//	B  batch       S→T  seq:uvarint entry*  (the round's effects on those slots)
//	P  ping        S→T
//	Q  seal?       T→S  (nothing)       (the slots are being handed over)
//	E  sealed      S→T  seq:uvarint     (the source serves none of the slots
//	                                     and sent every effect on them)
//
// The source answers Q once its server no longer routes any of the slots to
// itself (SetServes), once every command its server routed by an older
// topology has finished its store write (SetRouted: exact; without it,
// sealGrace, a margin), and after one whole drain round after that: every
// effect on the slots precedes E in the stream. The target merges the snapshot by largest TAT (other kinds:
// the source's state replaces its own) and applies batches in order, as a
// follower does; it serves none of the slots meanwhile.

const (
	frameMoveHello = 'M'
	frameSealReq   = 'Q'
	frameSealed    = 'E'
)

// sealGrace is how long a source with no SetRouted hook waits, after its
// server stopped routing the slots to itself, before the round that ends
// the stream: a margin for a command that passed the routing check with
// the old topology to finish its store write (a store write takes
// microseconds; a goroutine descheduled between the check and the write
// for longer would be missed). A node with a server (main) sets the hook,
// which waits exactly for those commands instead.
const sealGrace = 20 * time.Millisecond

// sealWait bounds how long the source waits for its server to stop routing
// the slots (the topology document's change reaching it).
const sealWait = 10 * time.Second

// mover is a target's connection as the source leader sees it.
type mover struct {
	p           *peer
	first, last int
	sealReq     chan struct{}
	gone        chan struct{} // closed when serveMover returns
}

func (m *mover) has(slot int) bool { return slot >= m.first && slot <= m.last }

// SetServes tells the node how to ask its server whether it routes a slot
// to itself now (the source's seal waits until it routes none of the moved
// slots). Safe for concurrent use; nil means the node serves no slot (a
// move is sealed at once).
func (n *Node) SetServes(fn func(slot int) bool) {
	n.serves.Store(&fn)
}

// SetRouted gives the node its server's wait for commands in flight
// (server.WaitRouted): it returns once every command routed by a topology
// older than the current one has made its store writes. A source's seal
// calls it after its server stopped routing the moved slots, instead of
// sleeping sealGrace. Safe for concurrent use.
func (n *Node) SetRouted(fn func(context.Context) error) {
	n.routed.Store(&fn)
}

// waitRouted waits for the commands routed by an older topology (SetRouted),
// or sealGrace without the hook; false when the leader stopped, the mover
// went, or sealWait passed first.
func (l *leader) waitRouted(m *mover) bool {
	p := l.n.routed.Load()
	if p == nil || *p == nil {
		time.Sleep(sealGrace)
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), sealWait)
	defer cancel()
	go func() {
		select {
		case <-l.done:
		case <-m.gone:
		case <-ctx.Done():
		}
		cancel()
	}()
	return (*p)(ctx) == nil
}

func (n *Node) servesAny(first, last int) bool {
	p := n.serves.Load()
	if p == nil || *p == nil {
		return false
	}
	for s := first; s <= last; s++ {
		if (*p)(s) {
			return true
		}
	}
	return false
}

// serveMover runs a target's connection on the source leader: welcome, the
// snapshot of the slots, then their effects round by round, and the seal
// when asked.
func (l *leader) serveMover(c net.Conn, r *bufio.Reader, payload []byte) {
	d := decoder{b: payload[len(magic):]}
	theirs, first, last := d.uvarint(), int(d.uvarint()), int(d.uvarint())
	if d.err != nil || first < 0 || last >= cluster.SlotCount || first > last {
		refuse(c, "bad move hello")
		return
	}
	if theirs != l.epoch {
		refuse(c, fmt.Sprintf("the source leads at epoch %d, not %d", l.epoch, theirs))
		return
	}
	c.SetDeadline(time.Time{})
	m := &mover{p: &peer{conn: c, wake: make(chan struct{}, 1)}, first: first, last: last,
		sealReq: make(chan struct{}, 1), gone: make(chan struct{})}
	l.mu.Lock()
	select {
	case <-l.done:
		l.mu.Unlock()
		return
	default:
	}
	from := l.lastRound // the snapshot covers every round up to here
	if l.movers == nil {
		l.movers = map[*mover]struct{}{}
	}
	l.movers[m] = struct{}{}
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		delete(l.movers, m)
		l.mu.Unlock()
		m.p.close()
		close(m.gone)
	}()
	go func() { // the target's requests
		defer m.p.close()
		var buf []byte
		for {
			c.SetReadDeadline(time.Now().Add(30 * time.Second))
			var t byte
			var err error
			t, _, buf, err = readFrame(r, buf)
			if err != nil {
				return
			}
			switch t {
			case frameSealReq:
				select {
				case m.sealReq <- struct{}{}:
				default:
				}
			case frameAck:
			default:
				return
			}
		}
	}()
	go l.sealWhenAsked(m)
	w := bufio.NewWriterSize(c, 256<<10)
	if _, err := w.Write(frame(nil, frameWelcome, binary.AppendUvarint(nil, l.epoch))); err != nil {
		return
	}
	start := time.Now()
	keys, err := l.snapshotSlots(w, first, last)
	if err != nil {
		l.n.log.Warn("slot move: snapshot to target failed", "target", c.RemoteAddr().String(), "err", err)
		return
	}
	if _, err := w.Write(frame(nil, frameSynced, binary.AppendUvarint(nil, from))); err != nil {
		return
	}
	if w.Flush() != nil {
		return
	}
	l.n.log.Info("slot move: snapshot sent", "target", c.RemoteAddr().String(), "slots", fmt.Sprintf("%d-%d", first, last),
		"keys", keys, "took", time.Since(start))
	m.p.pump(w, l.done)
}

// sealWhenAsked waits for the target's seal request, then for this node to
// route none of the slots, sealGrace, and one whole drain round; then it
// queues E behind that round's batch.
func (l *leader) sealWhenAsked(m *mover) {
	select {
	case <-m.sealReq:
	case <-l.done:
		return
	case <-m.gone:
		return
	}
	deadline := time.Now().Add(sealWait)
	for l.n.servesAny(m.first, m.last) {
		if time.Now().After(deadline) {
			l.n.log.Warn("slot move: still serving the slots; not sealed", "slots", fmt.Sprintf("%d-%d", m.first, m.last))
			m.p.close()
			return
		}
		select {
		case <-l.done:
			return
		case <-m.gone:
			return
		case <-time.After(time.Millisecond):
		}
	}
	if !l.waitRouted(m) {
		l.n.log.Warn("slot move: commands routed before the topology change did not finish; not sealed",
			"slots", fmt.Sprintf("%d-%d", m.first, m.last))
		m.p.close()
		return
	}
	if err := l.waitRound(); err != nil {
		return
	}
	l.mu.Lock()
	if _, ok := l.movers[m]; ok {
		m.p.send(frame(nil, frameSealed, binary.AppendUvarint(nil, l.lastRound)))
	}
	l.mu.Unlock()
	l.n.log.Info("slot move: sealed", "slots", fmt.Sprintf("%d-%d", m.first, m.last))
}

// waitRound returns once a drain round that started after the call has
// finished (its batches queued).
func (l *leader) waitRound() error {
	target := l.round.Load() + 1
	select {
	case l.kick <- struct{}{}:
	default:
	}
	for {
		l.mu.Lock()
		ok := l.lastRound >= target
		ch := l.changed
		l.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-l.done:
			return ErrFenced
		}
	}
}

// snapshotSlots writes the live keys of slots first..last, every database,
// as 'S' frames, and returns how many. Each shard lock is held while its
// keys are encoded (O(shard size): every key's slot is computed).
func (l *leader) snapshotSlots(w *bufio.Writer, first, last int) (int, error) {
	nowMs := time.Now().UnixMilli()
	var buf []byte
	var err error
	keys := 0
	l.n.dbs.Each(func(db int, st *store.Store) {
		for i := 0; i < store.NumShards && err == nil; i++ {
			var at int
			buf, at = startFrame(buf[:0], frameSnapshot)
			n := 0
			st.SnapshotShard(i, nowMs, func(c store.Change) {
				if s := cluster.KeySlot(c.Key); s >= first && s <= last {
					buf = appendEntry(buf, db, c)
					n++
				}
			})
			if n == 0 {
				continue
			}
			keys += n
			buf = finishFrame(buf, at)
			l.bytes.Add(int64(len(buf)))
			_, err = w.Write(buf)
			if cap(buf) > 1<<20 {
				buf = nil
			}
		}
	})
	return keys, err
}

// sendMoversLocked queues, for each mover, the entries of the round's
// batch (entries: the encoded entries of round seq) on its slots.
// Requires l.mu. Runs only while a move is under way.
func (l *leader) sendMoversLocked(seq uint64, entries []byte) {
	for m := range l.movers {
		var at int
		var out []byte
		out, at = startFrame(nil, frameBatch)
		out = binary.AppendUvarint(out, seq)
		d := decoder{b: entries}
		any := false
		for len(d.b) > 0 {
			before := d.b
			_, c := d.entry()
			if d.err != nil {
				break
			}
			if m.has(cluster.KeySlot(c.Key)) {
				out = append(out, before[:len(before)-len(d.b)]...)
				any = true
			}
		}
		if any {
			out = finishFrame(out, at)
			m.p.send(out)
			l.bytes.Add(int64(len(out)))
		}
	}
}

// ImportTask is one slot move this node (the leader of the target shard)
// pulls: slots First..Last from the leader of the source shard, at Source
// (its replication address) and Epoch. Final: the slots are being handed
// over (the source asked to seal). ID names the move (the topology
// document's record of it).
type ImportTask struct {
	ID          int64
	First, Last int
	Source      string
	Epoch       uint64
	Final       bool
}

// ImportState is an import's progress: State is "connecting", "copying",
// "synced" (the snapshot is merged; the stream is applied) or "sealed"
// (every effect on the slots is applied and the source serves none of
// them). Keys is how many keys the last snapshot carried, CopyMs how long
// it took to receive and merge.
type ImportState struct {
	ID     int64
	State  string
	Keys   int64
	CopyMs float64
}

// importer is one import's goroutine (target side).
type importer struct {
	n     *Node
	task  ImportTask
	final atomic.Bool
	link  // mu guards conn and the fields below

	state  ImportState
	w      *bufio.Writer
	synced bool // this connection's snapshot is merged
	qsent  bool // this connection asked to seal
}

// Import makes the node pull exactly tasks (as the target shard's leader):
// imports not listed stop, new ones start, a listed one whose source
// changed starts over from the new source (its snapshot merged into what
// the old one sent). Safe for concurrent use; returns at once.
func (n *Node) Import(tasks []ImportTask) {
	n.imu.Lock()
	defer n.imu.Unlock()
	want := map[int64]ImportTask{}
	for _, t := range tasks {
		want[t.ID] = t
	}
	changed := false
	for id, im := range n.imports {
		t, ok := want[id]
		if !ok || t.Source != im.task.Source || t.Epoch != im.task.Epoch || t.First != im.task.First || t.Last != im.task.Last {
			im.stop()
			delete(n.imports, id)
			changed = true
		}
	}
	for id, t := range want {
		if im, ok := n.imports[id]; ok {
			if t.Final && !im.final.Swap(true) {
				im.askSeal()
			}
			continue
		}
		if n.imports == nil {
			n.imports = map[int64]*importer{}
		}
		im := &importer{n: n, task: t, link: newLink()}
		im.final.Store(t.Final)
		im.state = ImportState{ID: t.ID, State: "connecting"}
		n.imports[id] = im
		changed = true
		go im.run()
	}
	if changed {
		n.importEvent()
	}
}

// stopImports ends every import (the node no longer leads).
func (n *Node) stopImports() {
	n.imu.Lock()
	defer n.imu.Unlock()
	for id, im := range n.imports {
		im.stop()
		delete(n.imports, id)
	}
}

// ImportStates is the progress of every import now.
func (n *Node) ImportStates() []ImportState {
	n.imu.Lock()
	defer n.imu.Unlock()
	var out []ImportState
	for _, im := range n.imports {
		im.mu.Lock()
		out = append(out, im.state)
		im.mu.Unlock()
	}
	return out
}

// ImportEvents receives a value whenever an import's state changes (at most
// one pending).
func (n *Node) ImportEvents() <-chan struct{} { return n.ievents }

func (n *Node) importEvent() {
	select {
	case n.ievents <- struct{}{}:
	default:
	}
}

func (im *importer) setState(s string) {
	im.mu.Lock()
	changed := im.state.State != s
	im.state.State = s
	im.mu.Unlock()
	if changed {
		im.n.importEvent()
	}
}

// askSeal sends Q on the current connection once its snapshot is merged
// (the session sends it at Z otherwise).
func (im *importer) askSeal() {
	im.mu.Lock()
	defer im.mu.Unlock()
	im.askSealLocked()
}

func (im *importer) askSealLocked() {
	if im.w == nil || !im.synced || im.qsent {
		return
	}
	im.qsent = true
	im.w.Write(frame(nil, frameSealReq, nil))
	im.conn.SetWriteDeadline(time.Now().Add(linkTimeout))
	im.w.Flush()
}

func (im *importer) run() {
	defer close(im.gone)
	// stop must not wait out a dial: ha's goroutine calls it.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-im.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	dialer := net.Dialer{Timeout: time.Second}
	backoff := 10 * time.Millisecond
	for !im.stopped() {
		c, err := dialer.DialContext(ctx, "tcp", im.task.Source)
		if err == nil {
			start := time.Now()
			err = im.session(c)
			if time.Since(start) > time.Second {
				backoff = 10 * time.Millisecond
			}
		}
		if im.stopped() {
			return
		}
		im.setState("connecting")
		im.n.log.Warn("slot move: link to source lost; retrying", "source", im.task.Source, "err", err, "in", backoff)
		select {
		case <-im.done:
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
}

var errMoveRefused = errors.New("slot move: source refused")

// session is one connection to the source: hello, snapshot, stream, seal.
func (im *importer) session(c net.Conn) error {
	defer c.Close()
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	w := bufio.NewWriter(c)
	im.mu.Lock()
	if im.stopped() {
		im.mu.Unlock()
		return nil
	}
	im.conn, im.w, im.synced, im.qsent = c, nil, false, false
	im.mu.Unlock()
	defer func() {
		im.mu.Lock()
		im.conn, im.w, im.synced = nil, nil, false
		im.mu.Unlock()
	}()
	hello := binary.AppendUvarint([]byte(magic), im.task.Epoch)
	hello = binary.AppendUvarint(hello, uint64(im.task.First))
	hello = binary.AppendUvarint(hello, uint64(im.task.Last))
	r, p, buf, refused, err := greet(c, frameMoveHello, hello)
	if err != nil {
		return err
	}
	if refused != "" {
		return fmt.Errorf("%w: %s", errMoveRefused, refused)
	}
	var t byte
	c.SetDeadline(time.Time{})
	im.n.clearOnce(im.task)
	im.setState("copying")
	f := &follower{n: im.n} // apply's scratch
	start := time.Now()
	var keys int64
	sealed := false
	for {
		c.SetReadDeadline(time.Now().Add(linkTimeout))
		t, p, buf, err = readFrame(r, buf)
		if err != nil {
			return err
		}
		switch t {
		case frameSnapshot:
			if err := f.apply(p, true, nil); err != nil {
				return err
			}
			keys += int64(len(f.ents))
		case frameSynced:
			im.mu.Lock()
			im.state.Keys, im.state.CopyMs = keys, float64(time.Since(start).Microseconds())/1000
			im.w, im.synced = w, true
			if im.final.Load() {
				im.askSealLocked()
			}
			im.mu.Unlock()
			im.setState("synced")
			im.n.log.Info("slot move: snapshot merged", "source", im.task.Source,
				"slots", fmt.Sprintf("%d-%d", im.task.First, im.task.Last), "keys", keys, "took", time.Since(start))
		case frameBatch:
			d := decoder{b: p}
			d.uvarint()
			if d.err != nil {
				return d.err
			}
			if err := f.apply(d.b, false, nil); err != nil {
				return err
			}
			if sealed && len(f.ents) > 0 {
				// A write reached the source's store after its seal (a
				// source without the SetRouted hook, whose command was
				// descheduled past sealGrace between its routing check
				// and its write): applied, but if this node already
				// serves the slots, that key may have granted twice.
				im.n.log.Warn("slot move: a change reached the source after its seal", "slots",
					fmt.Sprintf("%d-%d", im.task.First, im.task.Last), "changes", len(f.ents))
			}
		case frameSealed:
			sealed = true
			im.setState("sealed")
			im.n.log.Info("slot move: sealed by the source", "slots", fmt.Sprintf("%d-%d", im.task.First, im.task.Last))
		case framePing:
		case frameRefusal:
			return fmt.Errorf("%w: %s", errMoveRefused, p)
		default:
			return errProtocol
		}
	}
}

// clearOnce deletes, the first time an import of move t connects, every
// key this node holds in t's slots: it does not serve them, so they are
// left from an earlier ownership and must not outlive the source's state
// (a key deleted since would come back). A later connection of the same
// move (the source failed over) merges into what the first one brought.
func (n *Node) clearOnce(t ImportTask) {
	n.cmu.Lock()
	if n.cleared == nil {
		n.cleared = map[int64]bool{}
	}
	done := n.cleared[t.ID]
	n.cleared[t.ID] = true
	n.cmu.Unlock()
	if done {
		return
	}
	nowMs := time.Now().UnixMilli()
	n.dbs.Each(func(_ int, st *store.Store) {
		var stale [][]byte
		st.EachKey(nowMs, func(k []byte) bool {
			if s := cluster.KeySlot(k); s >= t.First && s <= t.Last {
				stale = append(stale, append([]byte(nil), k...))
			}
			return true
		})
		for _, k := range stale {
			st.ApplyChange(store.Change{Key: k, Deleted: true}, nil, false, nowMs)
		}
	})
}
