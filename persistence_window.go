package main

import (
	"errors"
	"fmt"

	_ "github.com/celld/celld/data" // CL.WINDOW registers itself (data/window.go)
	"github.com/celld/celld/persist"
	"github.com/celld/celld/store"
	"github.com/celld/celld/window"
)

// loadWindow restores one CL.WINDOW key (a 'w' entry) during load. After a
// clock step back of backMs (see load), a LOG state's unit times and the
// key's expiry move back with the clock, as TATs do; FIXED and SLIDING
// count epoch-aligned windows, so their state and expiry stay as written
// (window.ShiftBack).
func (p *persistence) loadWindow(st *store.Store, key, state []byte, exp, backMs int64) error {
	if backMs != 0 {
		if shifted, ok := window.ShiftBack(state, backMs, p.winBuf); ok {
			state, p.winBuf = shifted, shifted
			if exp != 0 {
				exp -= backMs
			}
		}
	}
	if err := st.LoadWindow(key, state, exp); err != nil {
		if errors.Is(err, store.ErrWindowState) {
			// Unreadable data, as a damaged object image is
			// (persistence_types.go): --recover=skip applies to it.
			return fmt.Errorf("restoring window key %q: %w: %w", key, persist.ErrCorrupt, err)
		}
		return fmt.Errorf("restoring window key %q: %w", key, err)
	}
	return nil
}
