package repl

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/celld/celld/store"
)

// follower is one term of following: a goroutine that connects to the
// leader, merges its snapshot, applies its stream and acknowledges it,
// reconnecting (and resyncing) after any failure until stop. Its stop
// (link.stop) ends the term and returns once nothing more will be
// applied, so that a promotion (Lead) never has an old leader's change
// land after its own writes began.
type follower struct {
	n     *Node
	epoch uint64
	addr  string
	// link: done, gone (closed when run has returned: nothing more is
	// applied), and mu guarding conn and rate.
	link

	applied atomic.Uint64 // the last seq applied
	recv    atomic.Int64  // bytes read from leaders
	synced  atomic.Bool
	lastIO  atomic.Int64 // unix ns of the last frame read from the leader
	// refused counts changes of CL.WINDOW states this node refused as
	// damaged (apply drops the key instead; Status.DroppedDamaged).
	refused atomic.Int64

	// mirrored says a session of this term has completed a sync: from
	// then on everything the follower holds came from this leader, so a
	// later session's snapshot (a resync after a dropped link or a
	// SWAPDB) replaces what is held instead of merging TATs by the
	// larger one. Only the first sync of a term merges state from
	// elsewhere (the node led, or followed another leader). Session
	// goroutine's only.
	mirrored bool

	rate rateMeter // guarded by mu

	// apply's scratch (the session goroutine's)
	ents []ent
	keys [][]byte
	hs   [32]uint64
}

func newFollower(n *Node, epoch uint64, addr string) *follower {
	return &follower{n: n, epoch: epoch, addr: addr, link: newLink()}
}

// link is the lifetime of a goroutine that keeps one connection to a
// peer: a follower's sessions with its leader, an importer's with a
// source leader. stop closes done and the current connection and waits
// until gone is closed, which the goroutine does when it has returned.
// mu guards conn (and what the embedding type says it guards). Make one
// with newLink; the zero value only serves a scratch value never run.
type link struct {
	done chan struct{}
	gone chan struct{}
	once sync.Once
	mu   sync.Mutex
	conn net.Conn
}

// newLink is a link not yet stopped.
func newLink() link { return link{done: make(chan struct{}), gone: make(chan struct{})} }

// stop ends the link and returns once its goroutine has returned. Safe to
// call more than once and from any goroutine.
func (l *link) stop() {
	l.once.Do(func() {
		close(l.done)
		l.mu.Lock()
		if l.conn != nil {
			l.conn.Close()
		}
		l.mu.Unlock()
	})
	<-l.gone
}

// stopped says whether stop has been called.
func (l *link) stopped() bool {
	select {
	case <-l.done:
		return true
	default:
		return false
	}
}

// linkTimeout is how long a follower waits for any frame (the leader
// pings every 100 ms) before it reconnects.
const linkTimeout = time.Second

func (f *follower) run() {
	defer close(f.gone)
	backoff := 10 * time.Millisecond
	for !f.stopped() {
		c, err := net.DialTimeout("tcp", f.addr, time.Second)
		if err == nil {
			start := time.Now()
			err = f.session(c)
			if time.Since(start) > time.Second {
				backoff = 10 * time.Millisecond
			}
		}
		f.synced.Store(false)
		if f.stopped() {
			return
		}
		f.n.log.Warn("replication: link to leader lost; retrying", "leader", f.addr, "err", err, "in", backoff)
		select {
		case <-f.done:
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
}

// session is one connection's life: handshake, snapshot, stream.
func (f *follower) session(c net.Conn) error {
	f.mu.Lock()
	if f.stopped() {
		f.mu.Unlock()
		c.Close()
		return nil
	}
	f.conn = c
	f.mu.Unlock()
	defer c.Close()
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	c = rawConn(c)
	w := bufio.NewWriter(c)
	hello := binary.AppendUvarint([]byte(magic), f.epoch)
	r, p, buf, refused, err := greet(c, frameHello, hello)
	if err != nil {
		return err
	}
	if refused != "" {
		return fmt.Errorf("leader refused: %s", refused)
	}
	var t byte
	d := decoder{b: p}
	if theirs := d.uvarint(); d.err != nil || theirs != f.epoch {
		return fmt.Errorf("leader at epoch %d, following epoch %d: refused", theirs, f.epoch)
	}
	c.SetWriteDeadline(time.Time{})

	// Keys held before the sync that the snapshot does not name are
	// deleted at its end: the leader of the newer epoch is authoritative.
	var left []map[string]struct{}
	if f.n.dbs.Keys() > 0 {
		nowMs := time.Now().UnixMilli()
		left = make([]map[string]struct{}, f.n.dbs.Len())
		f.n.dbs.Each(func(i int, st *store.Store) {
			left[i] = map[string]struct{}{}
			st.EachKey(nowMs, func(k []byte) bool {
				left[i][string(k)] = struct{}{}
				return true
			})
		})
	}
	synced := false
	var ackBuf [2 + binary.MaxVarintLen64]byte
	// The read deadline is pushed back at most every linkTimeout/4 (a
	// deadline change is a runtime timer's), so a silent leader is
	// noticed after between 3/4 and 1 linkTimeout.
	var deadline, wdeadline time.Time // (and the write deadline likewise)
	for {
		now := time.Now()
		if deadline.Sub(now) < linkTimeout*3/4 {
			deadline = now.Add(linkTimeout)
			c.SetReadDeadline(deadline)
		}
		t, p, buf, err = readFrame(r, buf)
		if err != nil {
			return err
		}
		f.recv.Add(int64(len(p)) + 2)
		now = time.Now()
		f.lastIO.Store(now.UnixNano())
		var ack uint64
		switch t {
		case frameSnapshot:
			if synced {
				return errProtocol
			}
			if err := f.apply(p, !f.mirrored, left); err != nil {
				return err
			}
			continue
		case frameSynced:
			d := decoder{b: p}
			ack = d.uvarint()
			if d.err != nil {
				return d.err
			}
			for i, keys := range left {
				if st := f.n.dbs.Existing(i); st != nil {
					for k := range keys {
						st.ApplyChange(store.Change{Key: []byte(k), Deleted: true}, nil, false, 0)
					}
				}
			}
			left, synced, f.mirrored = nil, true, true
			// Seqs are this leader process's rounds: one restarted at
			// the same epoch counts from 1 again, so what a previous
			// session applied must not be acknowledged to it (pings
			// acknowledge applied).
			f.applied.Store(ack)
			f.synced.Store(true)
			f.n.log.Info("replication: synced from leader", "leader", f.addr, "seq", ack)
		case frameBatch:
			if !synced {
				return errProtocol
			}
			d := decoder{b: p}
			ack = d.uvarint()
			if d.err != nil {
				return d.err
			}
			if err := f.apply(d.b, false, nil); err != nil {
				return err
			}
		case framePing:
			ack = f.applied.Load()
			f.mu.Lock()
			f.rate.rate(time.Now(), f.recv.Load())
			f.mu.Unlock()
		case frameRefusal:
			return fmt.Errorf("leader refused: %s", p)
		default:
			return errProtocol
		}
		if ack > f.applied.Load() {
			f.applied.Store(ack)
		}
		if !synced {
			continue
		}
		k := binary.PutUvarint(ackBuf[2:], ack) // an ack frame: 'A', length (< 128), seq
		ackBuf[0], ackBuf[1] = frameAck, byte(k)
		w.Write(ackBuf[:2+k])
		if r.Buffered() == 0 { // group the acks of what arrived together
			if wdeadline.Sub(now) < linkTimeout*3/4 {
				wdeadline = now.Add(linkTimeout)
				c.SetWriteDeadline(wdeadline)
			}
			if err := w.Flush(); err != nil {
				return err
			}
		}
	}
}

var errBadDB = errors.New("repl: entry for a database this node does not have")

// apply applies a payload of entries (a snapshot's, merged by largest
// TAT when maxTAT, or a batch's or a resync's snapshot, in order),
// striking snapshot keys off left. Entries
// go in chunks whose keys are prefetched first (store.Prefetch), so that
// the index and slab misses of a chunk overlap. A plain TAT (the stream's
// commonest entry) is decoded into a small ent, not a whole store.Change
// (~200 bytes zeroed and copied per entry); any other entry is decoded
// again from its offset when applied.
func (f *follower) apply(p []byte, maxTAT bool, left []map[string]struct{}) error {
	nowMs := time.Now().UnixMilli()
	d := decoder{b: p}
	f.ents = f.ents[:0]
	for len(d.b) > 0 {
		at := len(p) - len(d.b)
		db, key, tat, exp, isTAT := d.tatEntry()
		if d.err != nil {
			return d.err
		}
		if db >= f.n.dbs.Len() {
			return errBadDB
		}
		e := ent{db: db, key: key, tat: tat, exp: exp, at: -1}
		if !isTAT {
			e.at = at
		}
		f.ents = append(f.ents, e)
	}
	const chunk = 32
	for i := 0; i < len(f.ents); i += chunk {
		part := f.ents[i:min(i+chunk, len(f.ents))]
		f.keys = f.keys[:0]
		for _, e := range part {
			if e.db == part[0].db {
				f.keys = append(f.keys, e.key)
			}
		}
		f.n.dbs.DB(part[0].db).Prefetch(f.keys, f.hs[:len(f.keys)])
		for j := range part {
			e := &part[j]
			if e.at < 0 {
				f.n.dbs.DB(e.db).ApplyTAT(e.key, e.tat, e.exp, maxTAT, nowMs)
				if left != nil && left[e.db] != nil {
					delete(left[e.db], string(e.key))
				}
				continue
			}
			d := decoder{b: p[e.at:]}
			_, c := d.entry()
			if d.err != nil {
				return d.err // cannot happen: tatEntry read it whole
			}
			var obj store.Object
			if !c.Deleted && c.Kind != store.KindString && c.Kind != store.KindWindow {
				var err error
				if obj, err = decodeObject(c.Kind, c.Image); err != nil {
					return err
				}
			}
			if err := f.n.dbs.DB(e.db).ApplyChange(c, obj, maxTAT, nowMs); err != nil {
				if !errors.Is(err, store.ErrWindowState) {
					return fmt.Errorf("applying %q: %w", c.Key, err)
				}
				// A CL.WINDOW state this node refuses (damaged on the
				// leader, which answers "damaged" for the key): stalling
				// the whole stream on it would stop every other key's
				// replication for good. The key is dropped here, as
				// unusable as it is on the leader, and said so.
				f.n.dbs.DB(e.db).ApplyChange(store.Change{Key: c.Key, Deleted: true}, nil, false, nowMs)
				f.refused.Add(1)
				f.n.log.Warn("replication: leader's CL.WINDOW state refused as damaged; key dropped on this node",
					"key", string(c.Key), "db", e.db, "leader", f.addr)
			}
			if left != nil && left[e.db] != nil {
				delete(left[e.db], string(c.Key))
			}
		}
	}
	clear(f.ents) // drop references to the frame buffer's bytes
	clear(f.keys)
	return nil
}

// ent is a decoded entry of database db: a plain TAT's (key, tat, exp)
// when at is -1, else the offset of the whole entry in the payload, for
// apply to decode into a store.Change.
type ent struct {
	db  int
	key []byte
	tat uint64
	exp int64
	at  int
}

func (f *follower) status(st *Status) {
	st.Leader = f.addr
	st.Acked = f.applied.Load()
	st.Synced = f.synced.Load()
	st.BytesRecv = f.recv.Load()
	st.DroppedDamaged = f.refused.Load()
	if at := f.lastIO.Load(); at != 0 {
		st.LastIO = time.Unix(0, at)
	}
	f.mu.Lock()
	st.BytesPerS = f.rate.last // updated on every ping
	f.mu.Unlock()
}
