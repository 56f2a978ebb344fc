package server

import (
	"sync"
	"sync/atomic"
)

// watchedKey is one WATCHed key as it was when watched: a key is modified
// when its store version or existence differs at EXEC.
type watchedKey struct {
	key    string
	ver    uint32
	exists bool
}

// watchRegistry maps watched keys to the clients watching them. Every
// write command touches its keys here after it runs (Server.call), which
// catches the changes store versions cannot see: a write that leaves a
// missing key missing (a 0 ms CL.THROTTLE peek) or a key created and expired
// again before EXEC. touch costs one atomic load when nobody watches.
type watchRegistry struct {
	n  atomic.Int64 // number of (key, client) registrations
	mu sync.Mutex
	m  map[string]map[*client]struct{} // guarded by mu
}

func (w *watchRegistry) init() { w.m = make(map[string]map[*client]struct{}) }

func (w *watchRegistry) add(c *client, key string) {
	w.mu.Lock()
	set := w.m[key]
	if set == nil {
		set = make(map[*client]struct{})
		w.m[key] = set
	}
	if _, ok := set[c]; !ok {
		set[c] = struct{}{}
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
				if _, ok := set[c]; ok {
					delete(set, c)
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

// touch marks every client watching key as dirty.
func (w *watchRegistry) touch(key []byte) {
	if w.n.Load() == 0 {
		return
	}
	w.mu.Lock()
	for c := range w.m[string(key)] {
		c.watchTouched.Store(true)
	}
	w.mu.Unlock()
}

// touchIf marks dirty the clients watching a key for which exists
// reports true (FLUSHDB, FLUSHALL: the keys they are about to remove).
// exists runs under w.mu and must not call back into w.
func (w *watchRegistry) touchIf(exists func(key string) bool) {
	if w.n.Load() == 0 {
		return
	}
	w.mu.Lock()
	for key, set := range w.m {
		if !exists(key) {
			continue
		}
		for c := range set {
			c.watchTouched.Store(true)
		}
	}
	w.mu.Unlock()
}
