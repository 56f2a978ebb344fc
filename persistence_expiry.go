package main

import "github.com/celld/celld/store"

// noteUnloggedExpiries hands persist the count of keys that expired
// without a deletion record since the last window (store/expire.go), so
// that its fold trigger counts them as it counted their records. Called by
// the drain, once per piece; 256 atomic swaps per database, no lock.
func (p *persistence) noteUnloggedExpiries(stores []*store.Store) {
	var n int64
	for _, st := range stores {
		if st != nil {
			n += st.TakeUnloggedExpiries()
		}
	}
	p.db.NoteUnloggedDeletes(n)
}
