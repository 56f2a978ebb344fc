package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/celld/celld/persist"
	"github.com/celld/celld/store"
)

// persistence joins the store's dirty lists to persist's flusher and answers
// the server's SAVE/BGSAVE/LASTSAVE/INFO persistence questions. It is safe
// for concurrent use.
type persistence struct {
	db      *persist.DB
	fl      *persist.Flusher
	st      *store.Store
	log     *slog.Logger
	restore persist.RestoreStats

	mu      sync.Mutex
	changes []store.Change // reused between drains; guarded by mu
}

// openPersistence opens the data directory, restores it into st and starts
// the flusher. It returns nil, nil when persistence is off. With
// --recover=skip an unreadable directory is moved aside and celld starts
// empty, saying so; otherwise the error names the directory and stops start-up.
func openPersistence(cfg config, st *store.Store, log *slog.Logger) (*persistence, error) {
	if !cfg.persist {
		log.Info("persistence off: state is memory-only")
		return nil, nil
	}
	if err := os.MkdirAll(cfg.dir, 0o755); err != nil {
		return nil, fmt.Errorf("data directory %s: %w", cfg.dir, err)
	}
	p := &persistence{st: st, log: log}
	db, err := persist.Open(cfg.dir, persist.Options{Logger: log})
	if err == nil {
		p.db = db
		err = p.load()
		if err != nil {
			db.Close()
		}
	}
	if err != nil {
		if errors.Is(err, persist.ErrLocked) || cfg.recoverMode != "skip" {
			return nil, fmt.Errorf("data directory %s: %w", cfg.dir, err)
		}
		aside := cfg.dir + ".unreadable-" + strconv.FormatInt(time.Now().Unix(), 10)
		log.Error("data directory unreadable; --recover=skip: moving it aside and starting EMPTY",
			"dir", cfg.dir, "moved_to", aside, "err", err)
		st.Flush()
		st.Drain(0, nil)
		if rerr := os.Rename(cfg.dir, aside); rerr != nil {
			return nil, fmt.Errorf("data directory %s: cannot move aside: %w", cfg.dir, rerr)
		}
		if err := os.MkdirAll(filepath.Clean(cfg.dir), 0o755); err != nil {
			return nil, err
		}
		if p.db, err = persist.Open(cfg.dir, persist.Options{Logger: log}); err != nil {
			return nil, fmt.Errorf("data directory %s: %w", cfg.dir, err)
		}
	}
	p.fl = persist.NewFlusher(p.db, persist.FlusherConfig{
		Interval: cfg.flushInterval,
		Drain:    p.drain,
		Logger:   log,
	})
	p.fl.Start()
	return p, nil
}

// load restores every live record into the store.
func (p *persistence) load() error {
	nowMs := time.Now().UnixMilli()
	stats, err := p.db.Restore(nowMs, func(key, value []byte, exp int64) error {
		p.st.Load(key, value, exp)
		return nil
	})
	if err != nil {
		return err
	}
	p.restore = stats
	p.log.Info("restored state", "keys", stats.Loaded, "expired_skipped", stats.Expired,
		"duration", stats.Duration.String())
	return nil
}

// drain converts the store's changes into persist ops (called by the
// flusher's goroutine once per window).
func (p *persistence) drain(nowMs int64, buf []persist.Op) []persist.Op {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.changes = p.st.Drain(nowMs, p.changes[:0])
	for _, c := range p.changes {
		buf = append(buf, persist.Op{Key: c.Key, Value: c.Text, ExpireAtMs: c.ExpireAtMs, Delete: c.Deleted})
	}
	clear(p.changes)
	return buf
}

// Save flushes every change so far durably (SAVE).
func (p *persistence) Save() error { return p.fl.FlushNow() }

// BackgroundSave starts a flush and returns at once (BGSAVE).
func (p *persistence) BackgroundSave() {
	go func() {
		if err := p.fl.FlushNow(); err != nil {
			p.log.Warn("BGSAVE failed", "err", err)
		}
	}()
}

// LastSave is when the last successful flush started (LASTSAVE).
func (p *persistence) LastSave() time.Time { return p.fl.Status().LastSuccessAt }

// InfoPersistence is the persistence section of INFO.
func (p *persistence) InfoPersistence() []string {
	s := p.fl.Status()
	status, age := "ok", int64(-1)
	if !s.LastFlushOK {
		status = "err"
	}
	if !s.LastSuccessAt.IsZero() {
		age = time.Since(s.LastSuccessAt).Milliseconds()
	}
	return []string{
		"celld_persistence:pebble",
		"last_flush_status:" + status,
		"last_flush_error:" + s.LastFlushErr,
		"last_flush_age_ms:" + strconv.FormatInt(age, 10),
		"last_flush_keys:" + strconv.Itoa(s.LastFlushKeys),
		"last_flush_duration_us:" + strconv.FormatInt(s.LastFlushDuration.Microseconds(), 10),
		"dirty_keys:" + strconv.Itoa(p.st.DirtyKeys()+s.PendingKeys),
		"flushes:" + strconv.FormatInt(s.Flushes, 10),
		"flush_errors:" + strconv.FormatInt(s.FlushErrors, 10),
		"rdb_last_save_time:" + strconv.FormatInt(unixOrZero(s.LastSuccessAt), 10),
		"restore_keys:" + strconv.FormatInt(p.restore.Loaded, 10),
		"restore_duration_ms:" + strconv.FormatInt(p.restore.Duration.Milliseconds(), 10),
	}
}

// Close stops the flusher after a final synced flush and closes the DB.
func (p *persistence) Close() error {
	err := p.fl.Stop()
	if cerr := p.db.Close(); err == nil {
		err = cerr
	}
	return err
}

func unixOrZero(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.Unix()
}
