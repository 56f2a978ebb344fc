package main

import (
	"fmt"

	"github.com/celld/celld/persist"
	"github.com/celld/celld/store"
)

// Databases on disk (docs/databases.md, persist/databases.go): every key is
// written under its store's persistent id (store.Store.ID; database 0's
// keys exactly as before databases existed), and the mapping from database
// number to id after a SWAPDB as one small entry, so a SWAPDB rewrites no
// key. MOVE and FLUSHDB are ordinary deletions and writes of the stores
// they touch.

// databases is every database: the Databases openPersistence made around
// the store main gave it, or (a persistence built by a test around one
// store) 16 databases made around it on first use.
func (p *persistence) databases() *store.Databases {
	p.dbsOnce.Do(func() {
		if p.dbs == nil {
			p.dbs, _ = store.Group(p.st, 16)
		}
	})
	return p.dbs
}

// storeOf is the store a restored entry of database id dbid goes to. While
// restoring no SWAPDB has run, so the store of id i is database i's. An id
// beyond --databases stops the restore: the data would have nowhere to go.
func (p *persistence) storeOf(dbid uint32) (*store.Store, error) {
	if int64(dbid) >= int64(p.databases().Len()) {
		return nil, fmt.Errorf("the data directory holds keys of database %d, but --databases is %d: start with --databases %d or more",
			dbid, p.databases().Len(), int64(dbid)+1)
	}
	return p.databases().DB(int(dbid)), nil
}

// decodePerm reads a restored database mapping (a deleted one, never
// written, would be the identity).
func (p *persistence) decodePerm(value []byte, deleted bool) ([]uint32, error) {
	if deleted {
		return nil, nil
	}
	perm, err := persist.DecodeDBMap(value)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", persist.ErrCorrupt, err)
	}
	return perm, nil
}

// applyPerm installs the restored mapping (nil: none was written).
func (p *persistence) applyPerm(perm []uint32) error {
	if perm == nil {
		return nil
	}
	if n := p.databases().Len(); len(perm) > n {
		// Written by a server with more databases: fine if the ones
		// beyond --databases were never swapped (their keys, if any,
		// stopped the restore already in storeOf).
		for i, id := range perm[n:] {
			if id != uint32(n+i) {
				return fmt.Errorf("the data directory's databases were swapped up to database %d, but --databases is %d: start with --databases %d or more",
					len(perm)-1, n, len(perm))
			}
		}
		perm = perm[:n]
	}
	if err := p.databases().SetPerm(perm); err != nil {
		return fmt.Errorf("%w: %v", persist.ErrCorrupt, err)
	}
	_, swaps, _ := p.databases().Perm()
	p.mapSwaps = swaps // on disk already
	return nil
}

// drainMap appends the database mapping to buf when a SWAPDB changed it
// since the last drain that wrote it (even back to the identity, which
// must override an earlier mapping). Requires p.mu.
func (p *persistence) drainMap(buf []persist.Op) []persist.Op {
	if p.databases().Swaps() == p.mapSwaps {
		return buf
	}
	perm, swaps, _ := p.databases().Perm()
	p.mapSwaps = swaps
	return append(buf, persist.Op{DB: persist.DBMapID, Value: persist.EncodeDBMap(perm)})
}

// eachStore runs fn over every store in use, then writes the mapping into
// the base w when it is not the identity (a base holds the whole state).
func (p *persistence) eachStore(fn func(*store.Store) error, w *persist.BaseWriter) error {
	perm, _, identity := p.databases().Perm()
	var err error
	p.databases().Each(func(_ int, st *store.Store) {
		if err == nil {
			err = fn(st)
		}
	})
	if err != nil {
		return err
	}
	if !identity {
		w.AddDBMap(perm)
		return w.Spill()
	}
	return nil
}

// emptyAll drops every database's keys and their queued changes (a
// --recover=skip start: the directory's contents are moved aside).
func (p *persistence) emptyAll() {
	p.databases().Each(func(_ int, st *store.Store) {
		st.Flush()
		st.Drain(0, nil)
	})
}
