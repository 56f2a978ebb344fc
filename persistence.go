package main

import (
	"log/slog"
	"time"

	"github.com/celld/celld/store"
)

// persistence wires the store's dirty lists to the persist package. Until
// that lands it is memory-only.
type persistence struct{}

func openPersistence(cfg config, st *store.Store, log *slog.Logger) (*persistence, error) {
	return nil, nil
}

func (p *persistence) Close() error { return nil }

func (p *persistence) Save() error               { return nil }
func (p *persistence) BackgroundSave()           {}
func (p *persistence) LastSave() time.Time       { return time.Time{} }
func (p *persistence) InfoPersistence() []string { return nil }
