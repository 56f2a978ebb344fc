package store

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// Databases are the numbered keyspaces SELECT chooses between, as Redis's
// databases: database i is a Store of its own (DB), so a key in one is
// never seen from another, while all of them share ONE memory account —
// one bound, one eviction policy and one eviction pool, whose samples
// are drawn from every database in proportion to its memory, as Redis's
// maxmemory is global. Database 0 is the store the Databases were made
// around; any other is created on first use (an unused database costs a
// nil pointer), so --databases may be large without costing memory.
//
// Persistent ids. SWAPDB swaps two databases' stores (an O(1) pointer
// swap, as Redis swaps their dicts), so the store a key lives in is not
// always the one its database number names. Each store carries an id
// (Store.ID) that never changes; persistence writes keys under the id,
// plus the mapping from database number to id when it is not the
// identity (Perm), so a SWAPDB costs one small record however many keys
// the two databases hold. A store created for database i gets the id
// that Perm assigns to i.
//
// Concurrency: every method is safe for concurrent use. DB is on the
// command path: one bounds check and one atomic load once the database
// exists. Creation, Swap and SetPerm take d.mu.
type Databases struct {
	acct  *memoryState
	track bool
	// tab is the stores by database number (nil: not used yet), replaced
	// whole under mu (copy on write) when a store is created or two are
	// swapped, so that a SWAPDB is one atomic step for every reader.
	tab   atomic.Pointer[[]*Store]
	n     int
	mu    sync.Mutex    // guards perm and the replacing of tab
	perm  []uint32      // perm[i]: the id of database i's store
	swaps atomic.Uint64 // bumped by every Swap and SetPerm
	repl  bool          // new stores log effects for replication (repl.go); guarded by mu
	sweep atomic.Uint32 // the database the next SweepStep starts at
}

// dbState is a Store's place among its Databases.
type dbState struct {
	id    uint32       // the persistent id (Databases)
	group *Databases   // nil for a store made by New alone
	own   atomic.Int64 // this store's published memory charges (pickStore)
}

// MaxDatabases is the most databases a Databases may have: far above any
// real use (Redis's default is 16), low enough that the table (8 bytes a
// database, copied when a database is first used or swapped) stays small.
const MaxDatabases = 1 << 16

// ErrDatabases: a database count below 1 or above MaxDatabases.
var ErrDatabases = errors.New("store: the number of databases must be between 1 and 65536")

// Group returns the Databases db0 is database 0 of, making n databases
// around it (sharing its memory account, bound and policy) when it is not
// in one yet; then n must be between 1 and MaxDatabases. When db0 is in a
// group already, n is ignored.
func Group(db0 *Store, n int) (*Databases, error) {
	if db0.group != nil {
		return db0.group, nil
	}
	if n < 1 || n > MaxDatabases {
		return nil, ErrDatabases
	}
	d := &Databases{acct: db0.memoryState, track: db0.track, n: n, perm: make([]uint32, n)}
	for i := range d.perm {
		d.perm[i] = uint32(i)
	}
	db0.group = d
	tab := make([]*Store, n)
	tab[0] = db0
	d.tab.Store(&tab)
	return d, nil
}

// Len is the number of databases.
func (d *Databases) Len() int { return d.n }

// DB returns database i's store, creating it on first use. i must be in
// [0, Len()). Cost once it exists: one atomic load and an index.
func (d *Databases) DB(i int) *Store {
	if st := (*d.tab.Load())[i]; st != nil {
		return st
	}
	return d.create(i)
}

func (d *Databases) create(i int) *Store {
	d.mu.Lock()
	defer d.mu.Unlock()
	if st := (*d.tab.Load())[i]; st != nil {
		return st
	}
	st := newStore(d.acct, d.track, d.perm[i])
	st.group = d
	if d.repl {
		st.SetRepl(true)
	}
	d.replaceLocked(func(tab []*Store) { tab[i] = st })
	return st
}

// Existing returns database i's store, or nil when it was never used
// (it holds no key then).
func (d *Databases) Existing(i int) *Store { return (*d.tab.Load())[i] }

// replaceLocked publishes a copy of the table changed by fn. Requires
// d.mu. Cost: O(Len()), on a database's first use and on SWAPDB only.
func (d *Databases) replaceLocked(fn func(tab []*Store)) {
	tab := append([]*Store(nil), *d.tab.Load()...)
	fn(tab)
	d.tab.Store(&tab)
}

// Each calls fn with every database that was ever used, in number order.
func (d *Databases) Each(fn func(i int, st *Store)) {
	for i, st := range *d.tab.Load() {
		if st != nil {
			fn(i, st)
		}
	}
}

// Swap exchanges the contents of databases i and j (SWAPDB): a command
// that runs after it in database i sees what j held. Both must be in
// [0, Len()). A command already running keeps the store it started with.
func (d *Databases) Swap(i, j int) {
	if i == j {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.replaceLocked(func(tab []*Store) { tab[i], tab[j] = tab[j], tab[i] })
	d.perm[i], d.perm[j] = d.perm[j], d.perm[i]
	d.swaps.Add(1)
}

// Perm returns a copy of the mapping from database number to store id and
// the swap count it is current for (Swaps). identity reports that every
// database i holds the store of id i (no swap since the start or since the
// mapping came back to that): persistence then writes no mapping at all.
func (d *Databases) Perm() (perm []uint32, swaps uint64, identity bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	identity = true
	for i, id := range d.perm {
		if id != uint32(i) {
			identity = false
		}
	}
	return append([]uint32(nil), d.perm...), d.swaps.Load(), identity
}

// Swaps counts Swap and SetPerm calls: a persister that wrote the mapping
// as of one count writes it again when the count has moved.
func (d *Databases) Swaps() uint64 { return d.swaps.Load() }

// ByID returns the store whose persistent id is id, creating it if needed
// (restoring a key written under id), or nil when no database has that id
// (id >= Len()).
func (d *Databases) ByID(id uint32) *Store {
	if int64(id) >= int64(d.n) {
		return nil
	}
	d.mu.Lock()
	i := -1
	for j, p := range d.perm {
		if p == id {
			i = j
			break
		}
	}
	d.mu.Unlock()
	return d.DB(i)
}

// ErrPerm: a mapping that is not a permutation of the database numbers.
var ErrPerm = errors.New("store: invalid database mapping")

// SetPerm makes database i hold the store of id perm[i] for every i (a
// restored mapping; database numbers perm does not reach keep ids of their
// own). perm must be a permutation of 0..Len()-1 (or of a prefix, the rest
// then the identity); else ErrPerm and nothing changes. For restoring,
// before anything is served.
func (d *Databases) SetPerm(perm []uint32) error {
	if len(perm) > d.n {
		return ErrPerm
	}
	seen := make([]bool, len(perm))
	for _, id := range perm {
		if int(id) >= len(perm) || seen[id] {
			return ErrPerm
		}
		seen[id] = true
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	byID := make(map[uint32]*Store, len(perm))
	old := *d.tab.Load()
	for i := range perm {
		if st := old[i]; st != nil {
			byID[st.id] = st
		}
	}
	d.replaceLocked(func(tab []*Store) {
		for i, id := range perm {
			tab[i] = byID[id] // nil: never used, created with its id on first use
			d.perm[i] = id
		}
	})
	d.swaps.Add(1)
	return nil
}

// ID is the store's persistent id among its Databases (0 for a store made
// by New alone, and for database 0 until a SWAPDB involves it).
func (s *Store) ID() uint32 { return s.id }

// Databases returns the Databases the store belongs to, nil when none.
func (s *Store) Databases() *Databases { return s.group }

// UsedMemory is the account's used memory (Store.UsedMemory).
func (d *Databases) UsedMemory() int64 { return d.DB(0).UsedMemory() }

// Keys returns the number of keys held by every database (Store.Len).
func (d *Databases) Keys() int {
	n := 0
	d.Each(func(_ int, st *Store) { n += st.Len() })
	return n
}

// ExpiredKeys is Store.ExpiredKeys over every database.
func (d *Databases) ExpiredKeys() int64 {
	var n int64
	d.Each(func(_ int, st *Store) { n += st.ExpiredKeys() })
	return n
}

// ResetExpiredKeys is Store.ResetExpiredKeys for every database.
func (d *Databases) ResetExpiredKeys() {
	d.Each(func(_ int, st *Store) { st.ResetExpiredKeys() })
}

// DirtyKeys is Store.DirtyKeys over every database.
func (d *Databases) DirtyKeys() int {
	n := 0
	d.Each(func(_ int, st *Store) { n += st.DirtyKeys() })
	return n
}

// FlushAll empties every database (FLUSHALL).
func (d *Databases) FlushAll() {
	d.Each(func(_ int, st *Store) { st.Flush() })
}

// SweepStep is Store.SweepStep over every database within one budget,
// starting each call at the database after the one the previous call
// started at, so that a large database does not starve the others. It
// returns the keys deleted.
func (d *Databases) SweepStep(nowMs int64, budget time.Duration) int {
	deadline := time.Now().Add(budget)
	tab := *d.tab.Load()
	n := len(tab)
	start := int(d.sweep.Add(1)-1) % n
	deleted := 0
	for k := 0; k < n; k++ {
		st := tab[(start+k)%n]
		if st == nil {
			continue
		}
		left := time.Until(deadline)
		if left <= 0 {
			break
		}
		deleted += st.SweepStep(nowMs, left)
	}
	return deleted
}
