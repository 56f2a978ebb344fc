package main

import (
	"fmt"

	_ "github.com/celld/celld/data" // CL.WINDOW registers itself (data/window.go)
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
		return fmt.Errorf("restoring window key %q: %w", key, err)
	}
	return nil
}
