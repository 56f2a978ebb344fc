package server

import (
	"sync"
	"sync/atomic"
)

// watchedKey is one WATCHed key as it was when watched: a key is modified
// when its store version or existence differs at EXEC.
type watchedKey struct {
	key    string
	db     int // the database the key was watched in
	ver    uint32
	exists bool
}

// watcher is a client watching a key in one database: WATCH is per
// (database, key), as Redis's watched_keys are per db.
type watcher struct {
	c  *client
	db int
}

// watchRegistry maps watched keys to the clients watching them. Every
// write command touches its keys here after it runs (Server.call), which
// catches the changes store versions cannot see: a write that leaves a
// missing key missing (a 0 ms CL.THROTTLE peek) or a key created and expired
// again before EXEC. touch costs one atomic load when nobody watches.
type watchRegistry struct {
	n  atomic.Int64 // number of (key, client) registrations
	mu sync.Mutex
	m  map[string]map[watcher]struct{} // guarded by mu
}

func (w *watchRegistry) init() { w.m = make(map[string]map[watcher]struct{}) }

func (w *watchRegistry) add(c *client, db int, key string) {
	w.mu.Lock()
	set := w.m[key]
	if set == nil {
		set = make(map[watcher]struct{})
		w.m[key] = set
	}
	if _, ok := set[watcher{c, db}]; !ok {
		set[watcher{c, db}] = struct{}{}
		w.n.Add(1)
	}
	w.mu.Unlock()
}

// unwatchAll forgets every key c watches and clears its dirty flag.
func (w *watchRegistry) unwatchAll(c *client) {
	if len(c.watched) > 0 {
		w.mu.Lock()
		for _, k := range c.watched {
			if set := w.m[k.key]; set != nil {
				if _, ok := set[watcher{c, k.db}]; ok {
					delete(set, watcher{c, k.db})
					w.n.Add(-1)
				}
				if len(set) == 0 {
					delete(w.m, k.key)
				}
			}
		}
		w.mu.Unlock()
		c.watched = c.watched[:0]
	}
	c.watchTouched.Store(false)
}

// touch marks every client watching key in database db as dirty.
func (w *watchRegistry) touch(db int, key []byte) {
	if w.n.Load() == 0 {
		return
	}
	w.mu.Lock()
	for wr := range w.m[string(key)] {
		if wr.db == db {
			wr.c.watchTouched.Store(true)
		}
	}
	w.mu.Unlock()
}

// touchKeys touches the keys cmd names in args, in database db (what
// eachKey walks), without a closure.
// touchAnyDB marks every client watching key, in whichever database, as
// touched: for evictions, whose hook does not say the database (a spurious
// EXEC abort is the safe side of WATCH).
func (w *watchRegistry) touchAnyDB(key []byte) {
	if w.n.Load() == 0 {
		return
	}
	w.mu.Lock()
	for wr := range w.m[string(key)] {
		wr.c.watchTouched.Store(true)
	}
	w.mu.Unlock()
}

func (w *watchRegistry) touchKeys(cmd *command, args [][]byte, db int) {
	if cmd.keynum != nil {
		cmd.keynum.each(args, true, func(k []byte) { w.touch(db, k) }) // keyspecs.go
		return
	}
	if cmd.firstKey <= 0 || cmd.step <= 0 {
		return
	}
	last := cmd.lastKey
	if last < 0 {
		last += len(args)
	}
	for i := cmd.firstKey; i <= last && i < len(args); i += cmd.step {
		w.touch(db, args[i])
	}
}

// touchIf marks dirty the clients watching a key in a database for which
// exists reports true (FLUSHDB, FLUSHALL: the keys they are about to
// remove; SWAPDB: the keys that exist on either side). exists runs under
// w.mu and must not call back into w.
func (w *watchRegistry) touchIf(exists func(db int, key string) bool) {
	if w.n.Load() == 0 {
		return
	}
	w.mu.Lock()
	for key, set := range w.m {
		for wr := range set {
			if exists(wr.db, key) {
				wr.c.watchTouched.Store(true)
			}
		}
	}
	w.mu.Unlock()
}
