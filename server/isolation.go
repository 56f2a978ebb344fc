package server

import "sync"

// isolation makes EXEC (and, later, scripts) atomic with respect to every
// other command, as in Redis: ordinary commands hold a read lock while they
// run, EXEC holds the write lock for the whole transaction.
//
// It is a "big reader" lock: 16 RWMutexes on separate cache lines, a reader
// taking only the one its connection id selects, so the two cores' readers
// do not bounce one counter between them (one uncontended RLock/RUnlock pair,
// ~20 ns, per command). A writer takes all 16 in order.
type isolation struct {
	slots [isoSlots]struct {
		sync.RWMutex
		_ [64 - 24]byte
	}
}

const isoSlots = 16

func (l *isolation) rlock(id int64)   { l.slots[id%isoSlots].RLock() }
func (l *isolation) runlock(id int64) { l.slots[id%isoSlots].RUnlock() }

func (l *isolation) lock() {
	for i := range l.slots {
		l.slots[i].Lock()
	}
}

func (l *isolation) unlock() {
	for i := len(l.slots) - 1; i >= 0; i-- {
		l.slots[i].Unlock()
	}
}
