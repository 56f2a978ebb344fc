package main

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/celld/celld/config"
	"github.com/celld/celld/persist"
	"github.com/celld/celld/store"
)

// persistence joins the store's dirty lists to persist's flusher and answers
// the server's SAVE/BGSAVE/LASTSAVE/INFO persistence questions. It is safe
// for concurrent use.
type persistence struct {
	db      *persist.DB
	fl      *persist.Flusher
	st      *store.Store     // database 0 as main made it
	dbs     *store.Databases // every database: use databases() (persistence_dbs.go)
	dbsOnce sync.Once
	log     *slog.Logger
	restore persist.RestoreStats
	// mapSwaps is the store.Databases swap count whose mapping is on disk
	// or in the flusher's hands (persistence_dbs.go). Guarded by mu.
	mapSwaps uint64
	// restoredKeys is the store's size after the restore.
	restoredKeys int64
	// clockBackMs is how far the clock was behind the last flush stamp at
	// restore (0 normally); see load.
	clockBackMs int64
	winBuf      []byte // loadWindow's scratch (persistence_window.go)
	// onLoop runs a window's drain on the server's event loop (set by
	// main once the server exists: Server.RunOnLoop); nil, or false from
	// it, drains on the flusher's goroutine. See encodePiece.
	onLoop atomic.Pointer[func(fn func()) bool]

	mu sync.Mutex
	// scratch is where a drain formats the texts, window states and
	// object images it hands the encoder (one change's at a time).
	// Guarded by mu.
	scratch []byte
	// cur is the (store id × store.NumShards + shard) the next drain
	// starts at, visited how many of them the window's pieces have
	// drained so far (drainUpTo). Guarded by mu.
	cur, visited int
}

// openPersistence opens the data directory, restores it into st and starts
// the flusher. It returns nil, nil when persistence is off. With
// --recover=skip an unreadable directory's contents are moved aside (see
// moveAside) and celld starts empty, saying so; otherwise the error names
// the directory and stops start-up.
func openPersistence(cfg *config.Config, st *store.Store, log *slog.Logger) (*persistence, error) {
	if !cfg.Persist {
		log.Info("persistence off: state is memory-only")
		return nil, nil
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("data directory %s: %w", cfg.Dir, err)
	}
	dbs, err := store.Group(st, cmp.Or(cfg.Databases, 16))
	if err != nil {
		return nil, err
	}
	p := &persistence{st: st, dbs: dbs, log: log}
	db, err := persist.Open(cfg.Dir, persist.Options{Logger: log, FoldMinBytes: cfg.FoldMinBytes})
	if err == nil {
		p.db = db
		err = p.load(time.Now())
		if err != nil {
			db.Close()
		}
	}
	if err != nil {
		// --recover=skip is for data that cannot be read, never for a
		// directory that cannot be written (full disk, read-only) or is
		// in use: starting empty would not help, and would hand quotas back.
		unreadable := errors.Is(err, persist.ErrCorrupt) || errors.Is(err, persist.ErrFormat)
		if !unreadable || cfg.Recover != "skip" {
			return nil, fmt.Errorf("data directory %s: %w", cfg.Dir, err)
		}
		p.emptyAll()
		aside, rerr := moveAside(cfg.Dir, time.Now())
		if rerr != nil {
			return nil, fmt.Errorf("data directory %s: cannot move its contents aside: %w (restore error: %v)", cfg.Dir, rerr, err)
		}
		log.Error("data directory unreadable; --recover=skip: moved its contents aside and starting EMPTY",
			"dir", cfg.Dir, "moved_to", aside, "err", err)
		if p.db, err = persist.Open(cfg.Dir, persist.Options{Logger: log, FoldMinBytes: cfg.FoldMinBytes}); err != nil {
			return nil, fmt.Errorf("data directory %s: %w", cfg.Dir, err)
		}
	}
	p.fl = persist.NewFlusher(p.db, persist.FlusherConfig{
		Interval: cfg.FlushInterval,
		Encode:   p.encodePiece,
		Snapshot: p.snapshot,
		Idle:     p.idle,
		Logger:   log,
	})
	p.fl.Start()
	return p, nil
}

// asidePrefix names the directories --recover=skip moves unreadable
// contents into, inside the data directory.
const asidePrefix = "unreadable-"

// moveAside moves every entry of dir into a new directory
// dir/unreadable-<unix seconds> and returns its path. It renames entries
// within dir and never dir itself, so it works when dir is a mount point
// (a container's /data volume), where renaming dir fails with EBUSY.
// Directories an earlier skip made stay where they are. An entry that
// cannot be moved stops it with an error; the entries moved so far stay in
// the new directory.
func moveAside(dir string, now time.Time) (string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	aside := filepath.Join(dir, asidePrefix+strconv.FormatInt(now.Unix(), 10))
	for n := 1; ; n++ { // two skips within a second
		if _, err := os.Lstat(aside); errors.Is(err, os.ErrNotExist) {
			break
		}
		aside = filepath.Join(dir, asidePrefix+strconv.FormatInt(now.Unix(), 10)+"-"+strconv.Itoa(n))
	}
	if err := os.Mkdir(aside, 0o755); err != nil {
		return "", err
	}
	for _, e := range ents {
		if e.IsDir() && strings.HasPrefix(e.Name(), asidePrefix) {
			continue
		}
		if err := os.Rename(filepath.Join(dir, e.Name()), filepath.Join(aside, e.Name())); err != nil {
			return aside, err
		}
	}
	return aside, nil
}

// load restores the stored state into the store, as of the wall clock now.
//
// persist replays the base and then the log (persist.DB.Replay): a key may
// be loaded and then overwritten or removed again (store.Load / Unload, no
// dirty marks: the disk already says so).
//
// Clock steps. Stored TATs and expiries are wall-clock times, so a clock
// that stepped back while celld was down would make every key look further
// ahead than it is: a client would wait out its delay plus the step.
// persist stamps every flush with the wall time it was committed at
// (persist.DB.LastFlushedAt), and every record on disk was computed at or
// before that stamp. If now is earlier than the stamp by X ms, the clock
// went back by at least X, and load undoes that much:
//
//   - a record whose ExpireAtMs is not after the stamp had expired by the
//     old clock: it is not restored (Replay with the stamp as "now");
//   - every other non-zero ExpireAtMs becomes ExpireAtMs − X;
//   - a value that is a canonical decimal (store.ParseValue, and the text
//     is exactly its decimal form) whose TAT is after now (in ns) becomes
//     TAT − X·1e6, saturating at 0. A TAT at or before now is left as
//     written: it counts as "now" whether shifted or not, so there is no
//     reason to rewrite it (a SET k 5 stays 5). Verbatim values ("+5",
//     "007") and values that are not numbers are never rewritten.
//
// The shifted state is then written back as a new base (persist.DB.
// WriteBase, one synced switch), which also replaces the stamp with now:
// until it commits, the disk still holds the old records under the old
// stamp, so a crash in between just makes the next start shift again;
// after it, a restart sees shifted records and a matching stamp. Shifting
// is not repeated.
//
// So each key keeps exactly the delay (remaining quota) and remaining TTL it
// had at the last flush, which is the design's "clamp a TAT further ahead
// than a clock step can explain; never trust it blindly". If the stamp
// itself was wrong (a clock far in the future), the shift can only make
// TATs earlier: at worst that is a loss of state, which the loss bound
// (max_burst+1 extra per key, once) already covers.
//
// No per-record clamp against the record's own expiry. A CL.THROTTLE write
// sets ExpireAtMs = trunc(now/1e6) + trunc((TAT−now)/1e6), so TAT and
// ExpireAtMs·1e6 differ by under 2 ms and move together under any clock
// step: a rule like "TAT > now + (ExpireAtMs−nowMs)·1e6 + 1 s" can never
// detect a step. The records it would catch were written by SET, EXPIRE,
// PEXPIRE or PERSIST with a value and TTL chosen by a client, and rewriting
// those would break "after a restart GET and PTTL are exactly as before".
//
// Not covered: a step back while celld runs. Later flushes are stamped by
// the stepped clock, so the restart sees no step; keys written before the
// step stay ahead by it (as they already were in memory). And the stamp is
// that of the last flush that had changes, so after an idle period I a step
// back S < I goes unseen: keys then wait S longer than they should, but no
// key's delay is longer than it was at that last flush.
func (p *persistence) load(now time.Time) error {
	nowMs, nowNs := now.UnixMilli(), now.UnixNano()
	restoreMs, backMs := nowMs, int64(0)
	if last, ok := p.db.LastFlushedAt(); ok && last.UnixMilli() > nowMs {
		restoreMs = last.UnixMilli()
		backMs = restoreMs - nowMs
	}
	backNs := uint64(math.MaxUint64)
	if uint64(backMs) <= math.MaxUint64/1_000_000 {
		backNs = uint64(backMs) * 1e6
	}
	var (
		shifted int64
		buf     [20]byte
	)
	p.log.Info("restoring state", "base_bytes", p.db.BaseBytes(), "log_bytes", p.db.LogBytes())
	var perm []uint32             // the database mapping, when one was written
	gapNamed := map[string]bool{} // keys whose deltas were left out after a damaged record (loadObject), named in a WARN
	gapMore := 0                  // such deltas of keys past maxGapLines
	stats, err := p.db.ReplayAll(restoreMs, func(dbid uint32, key, value []byte, exp int64, kind persist.Kind, deleted bool) error {
		if dbid == persist.DBMapID {
			var err error
			perm, err = p.decodePerm(value, deleted)
			return err
		}
		st, err := p.storeOf(dbid) // persistence_dbs.go
		if err != nil {
			return err
		}
		if deleted {
			st.Unload(key)
			return nil
		}
		if kind == persist.KindWindow {
			return p.loadWindow(st, key, value, exp, backMs) // persistence_window.go
		}
		if backMs != 0 {
			if exp != 0 {
				exp -= backMs
			}
			if tat, ok := store.ParseValue(value); ok && tat > uint64(max(nowNs, 0)) &&
				string(strconv.AppendUint(buf[:0], tat, 10)) == string(value) {
				if tat > backNs {
					tat -= backNs
				} else {
					tat = 0
				}
				value = strconv.AppendUint(buf[:0], tat, 10)
				shifted++
			}
		}
		st.Load(key, value, exp)
		return nil
	}, func(dbid uint32, key []byte, kind byte, image []byte, exp int64) error {
		if backMs != 0 && exp != 0 {
			exp -= backMs
		}
		st, err := p.storeOf(dbid) // persistence_dbs.go
		if err != nil {
			return err
		}
		gaps, err := loadObject(st, key, kind, image, exp)
		if gaps > 0 {
			// A damaged record held one of this key's deltas: the later
			// ones are not applied (store.LoadDelta). One line per key,
			// for the first maxGapLines keys; the rest are counted.
			name := fmt.Sprintf("%d/%q", dbid, key)
			switch {
			case gapNamed[name]:
			case len(gapNamed) < maxGapLines:
				gapNamed[name] = true
				p.log.Warn("persist: a damaged change-log record held changes of this key; its later changes are not replayed, it keeps its state from before the damage",
					"db", dbid, "key", string(key))
			default:
				gapMore++
			}
		}
		return err
	})
	if err != nil {
		return err
	}
	if err := p.applyPerm(perm); err != nil {
		return err
	}
	p.restore = stats
	p.restoredKeys = int64(p.databases().Keys())
	p.clockBackMs = backMs
	if backMs != 0 {
		// Also stamps now, so the shift is not applied twice.
		if _, err := p.db.WriteBase(func(w *persist.BaseWriter) error { return p.snapshot(nowMs, w) }); err != nil {
			return fmt.Errorf("writing back records shifted for a clock step: %w", err)
		}
		p.log.Warn("clock is behind the last flush: shifted restored TATs and expiries back by the difference",
			"clock_back_ms", backMs, "tats_shifted", shifted, "keys_rewritten", p.restoredKeys)
	}
	if gapMore > 0 {
		p.log.Warn("persist: more deltas of other keys were not replayed after a damaged change-log record", "deltas", gapMore)
	}
	p.log.Info("restored state", "keys", p.restoredKeys, "expired_skipped", stats.Expired,
		"base_bytes", stats.BaseBytes, "log_bytes", stats.LogBytes, "duration", stats.Duration.String())
	return nil
}

// maxGapLines is how many keys a restore names, one WARN line each, when a
// damaged change-log record held changes of theirs (loadObject's gaps).
const maxGapLines = 10

// snapshot writes every live key into w, one store shard at a time
// (persist's base rewrite; called by the flusher's goroutine). Each shard's
// lock is held while its keys are encoded into memory, never across the
// base-file write that Spill does between shards.
func (p *persistence) snapshot(nowMs int64, w *persist.BaseWriter) error {
	add := func(c store.Change) {
		if c.Kind == store.KindWindow {
			if c.WinMode != 0 { // inline counters, as numbers (store.Change.WinMode)
				w.AddWindowCounters(c.Key, byte(c.WinMode), c.Win.Start, uint64(c.Win.Prev), uint64(c.Win.Curr), c.ExpireAtMs)
				return
			}
			w.AddWindow(c.Key, c.Text, c.ExpireAtMs)
			return
		}
		if c.Kind != store.KindString {
			w.AddObjectGen(c.Key, byte(c.Kind), c.Gen, c.Image, c.ExpireAtMs)
		} else if c.IsTAT {
			w.AddTAT(c.Key, c.TAT, c.ExpireAtMs)
		} else if c.Verbatim {
			w.AddVerbatim(c.Key, c.Text, c.ExpireAtMs)
		} else {
			w.Add(c.Key, c.Text, c.ExpireAtMs)
		}
	}
	return p.eachStore(func(st *store.Store) error { // persistence_dbs.go
		w.SetDB(st.ID())
		for i := range store.NumShards {
			st.DumpShardTAT(i, nowMs, add, w.AddTAT)
			if err := w.Spill(); err != nil {
				return err
			}
		}
		return nil
	}, w)
}

// encode hands every change since the previous drain to e, which encodes
// it into the change log's buffer (a drain that takes every change, as
// FlushNow's; called by the flusher's goroutine).
func (p *persistence) encode(nowMs int64, e *persist.Encoder) bool {
	return p.encodeUpTo(nowMs, e, 0)
}

// encodePiece is the flusher's drain (persist.FlusherConfig.Encode):
// under --maxmemory it stops once a piece holds about pieceOps(bound)
// changes and says more, so that a window's buffers (the changes'
// encoding) stay within the share of the bound reserved for them however
// many changes a window gathers; without a bound it takes every change,
// as encode does.
//
// The drain runs on the event loop when there is one (onLoop), in slices
// of at most loopSliceOps changes, each between two connections' commands
// (server.RunOnLoop runs it after the connection the loop is serving):
// the loop wrote the window's entries, so they are in its core's cache,
// and the drain reads and clears each of them. From the flusher's
// goroutine, on the other core, it took every drained entry's line away
// from the loop, which then missed on its next write of that key
// (BenchmarkThrottleDrained: other vs inline). The flusher waits for each
// slice (loopDrainWait at most for the loop to start it, else it drains
// that slice and the rest of the piece itself), then checksums, writes
// and syncs on its own goroutine as before. The slices drain what one
// call would, in the same order: a piece and a round end where they did.
func (p *persistence) encodePiece(nowMs int64, e *persist.Encoder) (more bool) {
	limit := pieceOps(p.st.MaxMemory())
	run := p.onLoop.Load()
	if run == nil {
		return p.encodeUpTo(nowMs, e, limit)
	}
	n := e.Len()
	round := limit == 0 // no bound: a whole round, as encodeUpTo(0)
	for {
		budget := loopSliceOps
		if limit > 0 {
			budget = min(budget, limit-(e.Len()-n))
		}
		var sliceMore bool
		slice := func() { sliceMore = p.encodeSlice(nowMs, e, budget, round) }
		if run == nil || !(*run)(slice) {
			slice()
			run = nil // the loop is busy, or is the caller (SAVE): the rest here
		}
		round = false
		if !sliceMore || (limit > 0 && e.Len()-n >= limit) {
			return sliceMore
		}
	}
}

// loopDrainWait is how long the flusher waits for the event loop to start
// a slice of its drain (encodePiece) before it drains that slice and the
// rest of the piece on its own goroutine: the loop is running a long
// command (a script), or is the caller (SAVE flushes from the loop). It
// adds at most this much to a piece, and only then.
const loopDrainWait = 2 * time.Millisecond

// loopSliceOps is the most changes one slice of a drain on the event loop
// takes (a slice may pass it by one store shard's changes): about 0.2-0.4
// ms of the loop's time for CL.THROTTLE's TATs, so that the loop's clients
// wait no longer than that for a window's drain, whatever its size.
const loopSliceOps = 8192

// pieceOps is the most changes a window's piece gathers under the bound n
// (0: no limit): the reserve main sets aside for persistence's buffers
// (persistReserve) divided by what a change costs in them
// (bytesPerPieceOp), and at least minPieceOps. A piece may pass it by one
// store shard's changes.
func pieceOps(n int64) int {
	if n <= 0 {
		return 0
	}
	return int(max(persistReserve(n)/bytesPerPieceOp, minPieceOps))
}

const (
	// bytesPerPieceOp is a change's bytes in a window's buffers: its
	// encoding in the log buffer (a key, a TAT or a short text), room
	// for the pending set's copy should the write fail, and growth
	// slack.
	bytesPerPieceOp = 256
	// minPieceOps keeps pieces large enough that a small bound does not
	// turn a window into many synced writes.
	minPieceOps = 4096
)

// encodeUpTo drains the stores' shards into e from where the previous
// piece stopped (p.cur), in (store id, shard) order, wrapping around,
// until e holds limit changes (0: no limit) or every shard has been
// drained once since the window's first piece; more reports the former.
// So a window whose pieces are drained until more is false has taken
// every change made before it started, whatever SWAPDB did meanwhile
// (stores are visited by their persistent ids, which a swap does not
// change). A call without a limit always drains a whole round. After a
// failed write cut a window short, the next window finishes that round
// first: a change made in a shard the round had passed waits for the
// window after it.
//
// Each change is encoded while its shard's lock is held
// (store.DrainShardsViewNumbers): no key is copied and no persist.Op is
// built; a plain TAT goes straight to e.TAT, inline window counters to
// e.WindowCounters and a window state in a block to e.Window, without a
// store.Change.
func (p *persistence) encodeUpTo(nowMs int64, e *persist.Encoder, limit int) (more bool) {
	return p.encodeSlice(nowMs, e, limit, limit == 0)
}

// encodeSlice is encodeUpTo with the start of a new round (every change
// so far: FlushNow's promise) asked for by round instead of by limit 0,
// so that encodePiece can take an unbounded round in bounded slices. It
// runs on the flusher's goroutine or, for it, on the event loop while the
// flusher waits (encodePiece): e is the flusher's, and p.mu keeps the
// drain's cursor to one caller at a time.
func (p *persistence) encodeSlice(nowMs int64, e *persist.Encoder, limit int, round bool) (more bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if round {
		p.visited = 0 // every change so far (FlushNow's promise)
	}
	for _, op := range p.drainMap(nil) { // persistence_dbs.go: the database mapping after a SWAPDB
		e.Op(&op)
	}
	var byID [maxDrainDBs]*store.Store
	stores := byID[:0]
	p.databases().Each(func(_ int, st *store.Store) {
		for int(st.ID()) >= len(stores) {
			stores = append(stores, nil)
		}
		stores[st.ID()] = st
	})
	add := func(c *store.Change) {
		switch {
		case c.Deleted:
			e.Delete(c.Key)
		case c.Kind == store.KindString:
			if c.IsTAT {
				e.TAT(c.Key, c.TAT, c.ExpireAtMs)
			} else if c.Verbatim {
				e.Text(c.Key, c.Text, c.ExpireAtMs)
			} else {
				e.Set(c.Key, c.Text, c.ExpireAtMs)
			}
		case c.Kind == store.KindWindow:
			if c.WinMode != 0 { // inline counters, as numbers (store.Change.WinMode)
				e.WindowCounters(c.Key, byte(c.WinMode), c.Win.Start, uint64(c.Win.Prev), uint64(c.Win.Curr), c.ExpireAtMs)
				break
			}
			e.Window(c.Key, c.Text, c.ExpireAtMs)
		case c.Delta: // persist/delta.go: what the window changed
			e.Delta(c.Key, byte(c.Kind), c.Image, c.ExpireAtMs)
		default:
			e.Object(c.Key, byte(c.Kind), c.Gen, c.Image, c.ExpireAtMs)
		}
	}
	tat := e.TAT // plain TATs (CL.THROTTLE's) skip add's Change and switch
	// and so do inline window counters (CL.WINDOW FIXED and SLIDING keys
	// with short names), with the same arguments as add's KindWindow case
	// gives WindowCounters.
	win := e.WindowCounters
	// and window states in a block (CL.WINDOW LOG's), as add's
	// KindWindow case gives Window.
	state := e.Window
	total := len(stores) * store.NumShards
	n := e.Len()
	for p.visited < total && (limit == 0 || e.Len()-n < limit) {
		if p.cur >= total {
			p.cur = 0
		}
		id, first := p.cur/store.NumShards, p.cur%store.NumShards
		st := stores[id]
		if st == nil { // never used: nothing to drain
			p.cur += store.NumShards - first
			p.visited += store.NumShards - first
			continue
		}
		e.SetDB(st.ID())
		next, scratch := st.DrainShardsViewNumbers(nowMs, first, max(limit-(e.Len()-n), 0), p.scratch, add, tat, win, state)
		if cap(scratch) <= maxScratch {
			p.scratch = scratch
		}
		p.cur += next - first
		p.visited += next - first
	}
	p.noteUnloggedExpiries(stores) // persistence_expiry.go
	more = p.visited < total
	if !more {
		p.visited = 0 // the next window starts a new round at p.cur
	}
	// A drain lists a key's deletion before its write when it was
	// deleted and written again in the window, and persist applies
	// entries in order, so the write, the key's current state, wins.
	return more
}

// maxDrainDBs is the drain's room for stores on its stack; more databases
// (--databases above it) grow the slice.
const maxDrainDBs = 16

// maxScratch is the largest drain scratch kept between windows (a big
// object's image grows it past this once, not for good).
const maxScratch = 1 << 20

// idle runs when changes stop after a busy period (the flusher's Idle):
// it drops the drain's scratch and returns the heap a burst grew (its
// buffers and the base writer's) to the OS, so that a
// sidecar's RSS follows its live state. Cost: two forced GCs, at most once
// per busy-to-idle transition; the store's slabs hold no pointers, so the
// mark phase is short.
func (p *persistence) idle() {
	p.mu.Lock()
	p.scratch = nil
	p.mu.Unlock()
	// Two collections: buffers put back into sync.Pools
	// survive the first one in the pools' victim caches, and
	// an idle server would not collect again to free them.
	runtime.GC()
	debug.FreeOSMemory()
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
	d := p.db.Damage()
	status, age := "ok", int64(-1)
	if !s.LastFlushOK {
		status = "err"
	}
	if !s.LastSuccessAt.IsZero() {
		age = time.Since(s.LastSuccessAt).Milliseconds()
	}
	return []string{
		"celld_persistence:files",
		"last_flush_status:" + status,
		"last_flush_error:" + s.LastFlushErr,
		"last_flush_age_ms:" + strconv.FormatInt(age, 10),
		"last_flush_keys:" + strconv.Itoa(s.LastFlushKeys),
		"last_flush_duration_us:" + strconv.FormatInt(s.LastFlushDuration.Microseconds(), 10),
		"dirty_keys:" + strconv.Itoa(p.databases().DirtyKeys()+s.PendingKeys),
		"flushes:" + strconv.FormatInt(s.Flushes, 10),
		"flush_errors:" + strconv.FormatInt(s.FlushErrors, 10),
		"rdb_last_save_time:" + strconv.FormatInt(unixOrZero(s.LastSuccessAt), 10),
		"bases:" + strconv.FormatInt(s.Bases, 10),
		"base_errors:" + strconv.FormatInt(s.BaseErrors, 10),
		"last_base_keys:" + strconv.FormatInt(s.LastBase.Keys, 10),
		"last_base_bytes:" + strconv.FormatInt(s.LastBase.Bytes, 10),
		"last_base_duration_ms:" + strconv.FormatInt(s.LastBase.Duration.Milliseconds(), 10),
		"log_bytes:" + strconv.FormatInt(p.db.LogBytes(), 10),
		"restore_keys:" + strconv.FormatInt(p.restoredKeys, 10),
		"restore_duration_ms:" + strconv.FormatInt(p.restore.Duration.Milliseconds(), 10),
		"restore_clock_back_ms:" + strconv.FormatInt(p.clockBackMs, 10),
		"pending_keys:" + strconv.Itoa(s.PendingKeys),
		"pending_bytes:" + strconv.FormatInt(s.PendingBytes, 10),
		"base_in_progress:" + boolDigit(s.BaseRunning),
		"base_running_ms:" + strconv.FormatInt(baseRunningMs(s), 10),
		"last_base_error:" + s.LastBaseErr,
		"flush_consecutive_errors:" + strconv.Itoa(s.ConsecutiveErrors),
		"damaged_records:" + strconv.FormatInt(d.Records, 10),
		"damaged_bytes:" + strconv.FormatInt(d.Bytes, 10),
	}
}

func boolDigit(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// baseRunningMs is how long the running base rewrite has taken (0: none).
func baseRunningMs(s persist.Status) int64 {
	if !s.BaseRunning {
		return 0
	}
	return time.Since(s.BaseStartedAt).Milliseconds()
}

// Close stops the flusher after a final synced flush and closes the DB.
func (p *persistence) Close() error { return p.CloseBy(time.Time{}) }

// CloseBy is Close with a deadline (zero: none). The final flush is retried
// (every 100 ms) while it fails, until the deadline; if the flush or the
// close has not finished by then, CloseBy returns an error saying how many
// changed keys were not made durable, and leaves the rest to the process's
// exit (the change log is never left with a torn record that replay would
// take for data: see persist). So a SIGTERM exits within --shutdown-grace
// even when the disk is failing or wedged.
func (p *persistence) CloseBy(deadline time.Time) error {
	start := time.Now()
	done := make(chan error, 1)
	go func() {
		err := p.fl.Stop()
		for err != nil && !deadline.IsZero() && time.Until(deadline) > 100*time.Millisecond {
			time.Sleep(100 * time.Millisecond)
			err = p.fl.FlushNow()
		}
		if cerr := p.db.Close(); err == nil {
			err = cerr
		}
		done <- err
	}()
	var timeout <-chan time.Time
	if !deadline.IsZero() {
		t := time.NewTimer(max(time.Until(deadline), 0))
		defer t.Stop()
		timeout = t.C
	}
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("%w (%d changed keys not durable)", err, p.unflushed())
		}
		return nil
	case <-timeout:
		s := p.fl.Status()
		why := fmt.Sprintf("last error: %q", s.LastFlushErr)
		switch {
		case s.LastFlushErr == "" && time.Since(start) < 10*time.Millisecond:
			why = "the grace was used up before the flush could start (connections took it all)"
		case s.LastFlushErr == "":
			why = fmt.Sprintf("no write had failed: the flush was still collecting or writing them after %v", time.Since(start).Round(time.Millisecond))
		}
		return fmt.Errorf("final flush of %s did not finish within --shutdown-grace: %d changed keys not durable (%s)",
			p.db.Dir(), p.unflushed(), why)
	}
}

// unflushed is how many changed keys are not known to be durable: the
// store's dirty keys plus the flusher's pending ones.
func (p *persistence) unflushed() int {
	return p.databases().DirtyKeys() + p.fl.Status().PendingKeys
}

func unixOrZero(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.Unix()
}
