package persist

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// logKey is the pebble key of log chunk seq.
func logKey(seq uint64) []byte {
	k := make([]byte, 9)
	k[0] = logPrefix
	binary.BigEndian.PutUint64(k[1:], seq)
	return k
}

// baseChunkKey is the pebble key of chunk idx of base generation gen.
func baseChunkKey(gen uint64, idx uint32) []byte {
	k := make([]byte, 13)
	k[0] = basePrefix
	binary.BigEndian.PutUint64(k[1:], gen)
	binary.BigEndian.PutUint32(k[9:], idx)
	return k
}

// Write appends ops to the change log (changelog.go) as one record stamped
// with the "flushed_at" time, and syncs it: when it returns nil all of them
// are durable, and (below maxRecord bytes, i.e. always but for a shutdown
// flush of millions of keys) either all or none of them are applied after a
// crash. Later ops for the same key win. An empty ops is a no-op.
//
// Write is the only durable path for changes. It may be called concurrently
// with the other methods (calls are serialised). Cost: a sizing pass and an
// encoding pass over the ops into a reused buffer, a CRC-32C, one write and
// one fdatasync; pebble is
// not involved, so a failing or wedged pebble instance does not stop
// Writes. Write does not retain ops after it returns.
//
// On failure the change file is closed (the next Write starts a new one);
// callers retry by calling Write again with the same ops (which is what the
// Flusher does). A retry gets new seqs: a record of the failed attempt that
// did reach the disk is older, so the retry's ops still win on replay.
func (db *DB) Write(ops []Op) error {
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.closed.Load() {
		return ErrClosed
	}
	if len(ops) == 0 {
		return nil
	}
	stamp := db.now().UnixMilli()
	seq := db.mu.nextSeq
	buf, records := appendRecords(db.mu.logBuf[:0], ops, seq, stamp)
	// Seqs are never reused, even after a failure (its records, or its
	// file, may have reached the disk).
	db.mu.nextSeq = seq + uint64(records)
	err := db.appendLocked(buf, seq)
	if cap(buf) <= logBufRetain {
		db.mu.logBuf = buf[:0]
	} else {
		db.mu.logBuf = nil
	}
	if err != nil {
		return fmt.Errorf("persist: write %d ops to %s: %w", len(ops), db.dir, err)
	}
	db.mu.logBytes += int64(len(buf) - records*recordHeaderLen)
	db.logBytes.Store(db.mu.logBytes)
	var deletes int64
	for i := range ops {
		if ops[i].Delete {
			deletes++
		}
	}
	db.mu.logDeletes += deletes
	db.logDeletes.Store(db.mu.logDeletes)
	db.flushedAtMs.Store(stamp)
	return nil
}

// stampFlushed raises flushedAtMs to ms, for a base rewrite: a Write may
// have stamped a later time while it ran.
func (db *DB) stampFlushed(ms int64) {
	for {
		old := db.flushedAtMs.Load()
		if old >= ms || db.flushedAtMs.CompareAndSwap(old, ms) {
			return
		}
	}
}

// dropBuffers lets go of the buffers Write and WriteBase reuse (the
// Flusher calls it when changes stop). Safe for concurrent use.
func (db *DB) dropBuffers() {
	db.mu.Lock()
	db.mu.logBuf = nil
	db.mu.Unlock()
	if db.pm.TryLock() { // not while a base rewrite runs: it is using it
		db.pm.baseBuf = nil
		db.pm.Unlock()
	}
}

// logBufRetain is the largest record buffer Write keeps for the next
// window; a bigger one (e.g. a shutdown flush) is left to the GC.
const logBufRetain = 4 << 20

// LogBytes returns the size of the log written since the base, as far as
// this DB knows (Replay counts what it read; Write adds). Safe for
// concurrent use; O(1), one atomic load: INFO and metrics never wait for a
// write or a base rewrite in progress.
func (db *DB) LogBytes() int64 { return db.logBytes.Load() }

// BaseDue reports whether the log has grown enough that WriteBase should
// fold it: it is at least the base's size (and at least
// Options.FoldMinBytes), or
// Replay found expired or v1 records that only a base rewrite removes from
// disk. Keeping the log under the base's size bounds both the disk space and
// a restart's replay to about twice the live state, and the rewrites to
// one base's bytes per log's bytes. Safe for concurrent use;
// O(1).
func (db *DB) BaseDue() bool {
	if db.needBase.Load() || db.logBytes.Load() >= max(db.foldMin, db.baseBytes.Load()) {
		return true
	}
	// Most of the base deleted (keys expired): fold, so that the disk
	// follows the live state down instead of keeping the dead base until
	// the log outgrows it.
	base := db.baseKeys.Load()
	return base >= minShrinkFold && db.logDeletes.Load() >= base/2
}

// minShrinkFold is the smallest base (in keys) that BaseDue folds because
// half of it was deleted: below it the space is not worth a rewrite.
const minShrinkFold = 4096

// BaseWriter receives the full state during WriteBase. It is used by one
// goroutine (WriteBase's fill function) and is invalid after WriteBase
// returns.
type BaseWriter struct {
	db    *DB
	pdb   *pebble.DB
	abort *atomic.Bool
	gen   uint64
	idx   uint32 // the next chunk's index
	buf   []byte // chunks encoded and not yet written
	dbid  uint32 // the database the next Adds are in (SetDB)
	cuts  []int  // ends of the complete chunks in buf
	bytes int64
	keys  int64
	// err is the first pebble failure of Spill: WriteBase treats it as
	// pebble's, whatever fill makes of it, and Spill does not call pebble
	// again.
	err error
}

// Add appends one live key to the base being written. It only encodes into
// memory, so it may be called while the caller holds its own locks (e.g. a
// store shard's); O(len(key)+len(value)). key and value are copied.
func (w *BaseWriter) Add(key, value []byte, expireAtMs int64) {
	w.buf = appendDBPrefix(w.buf, w.dbid)
	w.buf = appendSet(w.buf, key, value, expireAtMs)
	w.added()
}

// AddTAT is Add for a value that is tat's decimal text, without the text:
// it is stored in 8 bytes (as Op.IsTAT). key is copied.
func (w *BaseWriter) AddTAT(key []byte, tat uint64, expireAtMs int64) {
	w.buf = appendDBPrefix(w.buf, w.dbid)
	w.buf = appendTAT(w.buf, key, tat, expireAtMs)
	w.added()
}

// added counts the entry just encoded and ends the chunk once it is full.
func (w *BaseWriter) added() {
	w.keys++
	if len(w.buf)-w.cutAt() >= maxChunk {
		w.cuts = append(w.cuts, len(w.buf))
	}
}

// cutAt is where the chunk being encoded starts in w.buf.
func (w *BaseWriter) cutAt() int {
	if len(w.cuts) == 0 {
		return 0
	}
	return w.cuts[len(w.cuts)-1]
}

// Spill writes the complete chunks encoded so far to pebble, one NoSync
// Set each (WriteBase's final synced batch makes them durable: pebble's WAL
// is one sequential log), and keeps the partial one. Call it between Adds
// without holding locks the data path needs, e.g. after each store shard,
// so the base is streamed to pebble instead of built whole in memory. One
// Set per chunk reuses pebble's pooled batches: no buffer the size of the
// base, or of a batch of chunks, is allocated.
func (w *BaseWriter) Spill() error {
	if w.err != nil {
		return w.err
	}
	if w.abort.Load() {
		w.err = ErrAborted
		return w.err
	}
	start := 0
	for _, end := range w.cuts {
		chunk := w.buf[start:end]
		if err := w.db.guardPebbleWrite(); err != nil {
			w.err = err
			return err
		}
		if err := callPebble(func() error {
			return w.pdb.Set(baseChunkKey(w.gen, w.idx), chunk, pebble.NoSync)
		}); err != nil {
			w.err = err
			return err
		}
		w.idx++
		w.bytes += int64(len(chunk))
		start = end
	}
	w.buf = w.buf[:copy(w.buf, w.buf[start:])]
	w.cuts = w.cuts[:0]
	return nil
}

// tidyTimeout bounds each of tidyLocked's waits on pebble.
const tidyTimeout = 30 * time.Second

// tidyLocked gives the disk space of the replaced base back, after a
// successful WriteBase: the new generation went through pebble's memtable
// and WAL, and the old one is only range-deleted. A flush moves the
// memtable into a table (its WAL files are then deleted), and a compaction
// of the base's key range drops the old generation's tables, so the
// directory holds about one base plus the log (~2x the live state) instead
// of several bases and WALs. It runs on the fold's goroutine, off the
// write path; each step is guarded like a base write (guardPebbleWrite)
// and waited for at most tidyTimeout (pebble retries a failing flush
// forever), and a failure only leaves the space for the next fold.
// db.pm must be held.
func (db *DB) tidyLocked(pdb *pebble.DB) {
	if err := db.guardPebbleWrite(); err != nil {
		return
	}
	var ch <-chan struct{}
	if err := callPebble(func() (err error) { ch, err = pdb.AsyncFlush(); return err }); err != nil {
		db.log.Debug("persist: flush after a base rewrite", "err", err)
		return
	}
	timer := time.NewTimer(tidyTimeout)
	defer timer.Stop()
	select {
	case <-ch:
	case <-timer.C:
		db.log.Warn("persist: pebble's flush after a base rewrite did not finish in time; disk space of the old base is kept for now", "timeout", tidyTimeout, "last_pebble_error", db.lastPebbleError())
		return
	}
	if err := db.guardPebbleWrite(); err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), tidyTimeout)
	defer cancel()
	if err := callPebble(func() error { return pdb.Compact(ctx, []byte{basePrefix}, []byte{basePrefix + 1}, false) }); err != nil {
		db.log.Debug("persist: compaction after a base rewrite", "err", err)
	}
}

// errUnsafeForPebble marks a base rewrite stopped before a pebble write
// because the directory looked unable to take it (see guardPebbleWrite).
var errUnsafeForPebble = errors.New("directory cannot take pebble's writes now; base rewrite stopped before calling pebble")

// guardPebbleWrite checks, before each pebble write of a base rewrite,
// that the directory can create a file and has room for pebble's next
// memtable flush. pebble v2.1.7 ends the process when it cannot create its
// next WAL while rotating it (a memtable filled during the rewrite: see
// DB), and when a MANIFEST write fails; a read-only directory, an immutable
// one or a full disk would do that. Checking first narrows that to a
// failure that starts within microseconds of the check. Cost: a create and
// a remove of an empty file, and a statfs, per 16 KiB chunk (~10 µs).
func (db *DB) guardPebbleWrite() error {
	name := db.fs.PathJoin(db.dir, probeName)
	f, err := db.fs.Create(name, vfs.WriteCategoryUnspecified)
	if err != nil {
		return fmt.Errorf("%w: %w", errUnsafeForPebble, err)
	}
	_ = f.Close()
	if err := db.fs.Remove(name); err != nil {
		return fmt.Errorf("%w: %w", errUnsafeForPebble, err)
	}
	if u, err := db.fs.GetDiskUsage(db.dir); err == nil && u.AvailBytes < 2*db.memTableSize+uint64(maxChunk) {
		return fmt.Errorf("%w: only %d bytes free, pebble may need %d: %w", errUnsafeForPebble, u.AvailBytes, 2*db.memTableSize, syscall.ENOSPC)
	}
	return nil
}

// BaseStats reports what WriteBase wrote.
type BaseStats struct {
	Keys, Bytes, Chunks int64
	Duration            time.Duration
}

// errFill marks an error returned by WriteBase's fill function itself.
type errFill struct{ err error }

func (e errFill) Error() string { return e.err.Error() }
func (e errFill) Unwrap() error { return e.err }

// WriteBase replaces the base with the full state fill gives it, and
// drops the log written so far, atomically (see the package comment).
//
// It starts by cutting the log: the current change file is ended, and the
// base will cover every record written before the cut (seq <= cut) and
// none after it. Contract with the caller: every record written before
// WriteBase was called must already be reflected in what fill adds, and
// every change fill may have missed, or may have added in a newer state,
// must reach a later Write (the Flusher guarantees both: the store's dirty
// sets hold every change not yet drained, and its writes happen in drain
// order). Records written after the cut replay on top of the base.
//
// WriteBase does not hold the change log's lock while fill runs or pebble
// writes: Writes go on beside it, into new change files. It holds the
// pebble lock throughout (a concurrent WriteBase, Replay or Close waits).
// Cost: one pass over the state, one pebble key per ~16 KiB, one fsync.
// On a pebble failure the instance is discarded; the old base and log stay
// in charge. fill's own error is returned as is. After AbortBases (or
// Close) it fails with ErrAborted at its next chunk.
func (db *DB) WriteBase(fill func(w *BaseWriter) error) (BaseStats, error) {
	start := time.Now()
	db.pm.Lock()
	defer db.pm.Unlock()
	if db.abortBase.Load() {
		return BaseStats{}, ErrAborted
	}
	pdb, err := db.instanceLocked()
	if err != nil {
		return BaseStats{}, err
	}
	// The cut.
	db.mu.Lock()
	lastSeq := db.mu.nextSeq - 1
	db.endChangeFileLocked()
	covered := len(db.mu.files)
	cutLogBytes := db.mu.logBytes
	cutDeletes := db.mu.logDeletes
	db.mu.Unlock()

	gen := db.pm.baseGen + 1
	w := &BaseWriter{db: db, pdb: pdb, abort: &db.abortBase, gen: gen, buf: db.pm.baseBuf[:0]}
	var stampMs int64
	err = callPebble(func() error {
		// Chunks of an interrupted earlier attempt at this generation.
		if err := pdb.DeleteRange(baseChunkKey(gen, 0), []byte{basePrefix + 1}, pebble.NoSync); err != nil {
			return err
		}
		if err := fill(w); err != nil {
			if w.err != nil {
				return w.err // a Spill inside fill failed: pebble's error
			}
			return errFill{err}
		}
		if err := w.Spill(); err != nil {
			return err
		}
		b := pdb.NewBatch()
		if len(w.buf) > 0 {
			if err := b.Set(baseChunkKey(gen, w.idx), w.buf, nil); err != nil {
				return err
			}
			w.idx++
			w.bytes += int64(len(w.buf))
		}
		var meta [24]byte
		binary.BigEndian.PutUint64(meta[:], gen)
		binary.BigEndian.PutUint64(meta[8:], lastSeq)
		binary.BigEndian.PutUint64(meta[16:], uint64(w.bytes))
		if err := b.Set(baseKey, meta[:], nil); err != nil {
			return err
		}
		if err := b.DeleteRange([]byte{basePrefix}, baseChunkKey(gen, 0), nil); err != nil {
			return err
		}
		if err := b.DeleteRange([]byte{logPrefix}, logKey(lastSeq+1), nil); err != nil {
			return err
		}
		if err := b.DeleteRange(recordLower, recordUpper, nil); err != nil {
			return err
		}
		var stamp [8]byte
		stampMs = db.now().UnixMilli()
		binary.BigEndian.PutUint64(stamp[:], uint64(stampMs))
		if err := b.Set(flushedKey, stamp[:], nil); err != nil {
			return err
		}
		if db.abortBase.Load() {
			return ErrAborted
		}
		if err := db.guardPebbleWrite(); err != nil {
			return err
		}
		if err := b.Commit(pebble.Sync); err != nil {
			return err
		}
		_ = b.Close()
		return nil
	})
	st := BaseStats{Keys: w.keys, Bytes: w.bytes, Chunks: int64(w.idx), Duration: time.Since(start)}
	if cap(w.buf) <= 1<<20 {
		db.pm.baseBuf = w.buf[:0] // pebble copied it; reuse it next time
	}
	if err != nil {
		var fe errFill
		if errors.As(err, &fe) {
			return st, fe.err
		}
		if errors.Is(err, ErrAborted) {
			return st, err
		}
		if errors.Is(err, errUnsafeForPebble) {
			// pebble was not called: its instance is fine.
			return st, fmt.Errorf("persist: write base to %s: %w", db.dir, err)
		}
		err = fmt.Errorf("persist: write base to %s: %w", db.dir, err)
		db.discardLocked(err)
		return st, err
	}
	db.stampFlushed(stampMs)
	db.tidyLocked(pdb)
	db.pm.baseGen, db.pm.baseSeq = gen, lastSeq
	db.baseBytes.Store(w.bytes)
	db.pm.legacy = false
	db.needBase.Store(false)
	// The change files listed at the cut hold only records at or below
	// lastSeq, now covered by the base; later ones stay.
	db.mu.Lock()
	db.removeChangeFilesLocked(covered)
	db.mu.logBytes -= cutLogBytes
	db.logBytes.Store(db.mu.logBytes)
	db.mu.logDeletes -= cutDeletes
	db.logDeletes.Store(db.mu.logDeletes)
	db.mu.Unlock()
	db.baseKeys.Store(w.keys)
	return st, nil
}

// Replay passes the stored state to fn, as of nowMs: the v1 records and the
// base, then the log in order. fn sees a key once per entry that mentions
// it, and the last call for a key is its state: deleted=false with value
// and expiry, or deleted=true (a delete entry, or a set entry that had
// expired by nowMs: ExpireAtMs != 0 && ExpireAtMs <= nowMs) meaning the key
// must not exist (it may never have been passed before). key and value are
// only valid during the call; copy them to keep them. If fn returns an error
// Replay stops and returns it; a panic in fn propagates.
//
// Replay is meant for start-up, before the Flusher runs; it holds the DB's
// mutex for the whole scan. Cost: one sequential read of the base and the
// log, O(their bytes), no allocation per entry. A chunk that does not decode
// yields ErrCorrupt.
func (db *DB) Replay(nowMs int64, fn func(key, value []byte, expireAtMs int64, deleted bool) error) (RestoreStats, error) {
	return db.ReplayDBs(nowMs, func(dbid uint32, key, value []byte, exp int64, deleted bool) error {
		if dbid == DBMapID {
			return nil
		}
		return fn(key, value, exp, deleted)
	})
}

// ReplayDBs is Replay with each entry's database id (Op.DB), and the
// database mapping (EncodeDBMap) as entries of the pseudo-database DBMapID
// whose value is the mapping (the last one wins). Replay flattens the
// databases: it is for callers that know there is only database 0.
func (db *DB) ReplayDBs(nowMs int64, fn func(dbid uint32, key, value []byte, expireAtMs int64, deleted bool) error) (RestoreStats, error) {
	start := time.Now()
	var st RestoreStats
	db.pm.Lock()
	defer db.pm.Unlock()
	db.mu.Lock()
	defer db.mu.Unlock()
	pdb, err := db.instanceLocked()
	if err != nil {
		return st, err
	}
	var (
		fnErr     error
		fnPanic   any
		fnPanicky bool
		legacy    int64
	)
	// fn is the caller's code: a panic in it is not pebble's and must not be
	// turned into ErrPebbleFatal. Catch it here, re-raise it below.
	apply := func(dbid uint32, k, v []byte, exp int64, deleted bool) (err error) {
		defer func() {
			if r := recover(); r != nil {
				fnPanic, fnPanicky = r, true
				err = errors.New("persist: replay callback panicked")
			}
		}()
		switch {
		case deleted:
			st.Deleted++
		case exp != 0 && exp <= nowMs:
			st.Expired++
			deleted, v, exp = true, nil, 0
		default:
			st.Loaded++
		}
		if err := fn(dbid, k, v, exp, deleted); err != nil {
			fnErr = err
			return err
		}
		return nil
	}
	baseGen, baseSeq := db.pm.baseGen, db.pm.baseSeq
	err = callPebble(func() error {
		// v1 records, one per key.
		if err := scan(pdb, recordLower, recordUpper, func(k, v []byte) error {
			if len(v) < expiryLen {
				return fmt.Errorf("%w: %s: record %q has a %d-byte value, want at least %d", ErrCorrupt, db.dir, k[1:], len(v), expiryLen)
			}
			legacy++
			st.BaseBytes += int64(len(k) + len(v))
			return apply(0, k[1:], v[expiryLen:], int64(binary.BigEndian.Uint64(v)), false)
		}); err != nil {
			return err
		}
		chunk := func(what string, bytes *int64) func(k, v []byte) error {
			return func(k, v []byte) error {
				*bytes += int64(len(v))
				cbErr, formatErr := decodeChunk(v, apply)
				if formatErr != nil {
					return fmt.Errorf("%w: %s: %s chunk %x: %v", ErrCorrupt, db.dir, what, k[1:], formatErr)
				}
				return cbErr
			}
		}
		if baseGen != 0 {
			if err := scan(pdb, baseChunkKey(baseGen, 0), baseChunkKey(baseGen+1, 0), chunk("base", &st.BaseBytes)); err != nil {
				return err
			}
		}
		// Log chunks a v3 directory kept in pebble, older than any
		// change file.
		return scan(pdb, logKey(baseSeq+1), []byte{logPrefix + 1}, chunk("log", &st.LogBytes))
	})
	if err == nil && !fnPanicky {
		var n int64
		n, err = db.replayChangeFilesLocked(apply)
		st.LogBytes += n
		d := db.Damage()
		st.DamagedRecords, st.DamagedBytes = d.Records, d.Bytes
	}
	st.Duration = time.Since(start)
	if fnPanicky {
		panic(fnPanic)
	}
	if fnErr != nil {
		return st, fnErr
	}
	if err != nil {
		if errors.Is(err, ErrCorrupt) {
			return st, err
		}
		if pebble.IsCorruptionError(err) {
			return st, fmt.Errorf("%w: restore from %s: %w", ErrCorrupt, db.dir, err)
		}
		err = fmt.Errorf("persist: restore from %s: %w", db.dir, err)
		if errors.Is(err, ErrPebbleFatal) {
			db.discardLocked(err)
		}
		return st, err
	}
	db.mu.logBytes = st.LogBytes
	db.logBytes.Store(st.LogBytes)
	if baseGen == 0 {
		db.baseBytes.Store(st.BaseBytes)
	}
	db.baseKeys.Store(st.Loaded) // the base's keys and the log's sets: an estimate
	if st.Expired > 0 || legacy > 0 {
		db.needBase.Store(true) // only a base rewrite removes them from disk
	}
	return st, nil
}

// scan calls fn for every pebble key in [lower, upper) with its value.
func scan(pdb *pebble.DB, lower, upper []byte, fn func(k, v []byte) error) error {
	it, err := pdb.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return err
	}
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err == nil {
			err = fn(it.Key(), v)
		}
		if err != nil {
			_ = it.Close()
			return err
		}
	}
	return it.Close()
}

// Restore calls fn once for every key live as of nowMs (ExpireAtMs 0 or
// greater than nowMs), in key order (bytewise; database 0's keys, then
// each other database's in id order: the same name in two databases is
// two keys), with its final state. It
// replays into a map first, so it costs O(keys) memory: fine for tests and
// tools; the server uses Replay. key and value are only valid during the
// call. If fn returns an error Restore stops and returns it; Loaded counts
// the keys fn accepted before that.
func (db *DB) Restore(nowMs int64, fn func(key, value []byte, expireAtMs int64) error) (RestoreStats, error) {
	type rec struct {
		value string
		exp   int64
	}
	state := map[pendingKey]rec{}
	st, err := db.ReplayDBs(nowMs, func(dbid uint32, k, v []byte, exp int64, deleted bool) error {
		if dbid == DBMapID {
			return nil
		}
		// The same name in two databases is two keys (databases.go).
		dk := pendingKey{dbid, string(k)}
		if deleted {
			delete(state, dk)
		} else {
			state[dk] = rec{string(v), exp}
		}
		return nil
	})
	if err != nil {
		return st, err
	}
	keys := make([]pendingKey, 0, len(state))
	for k := range state {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, compareDBKeys) // databases.go
	st.Loaded = 0
	for _, k := range keys {
		r := state[k]
		if err := fn([]byte(k.key), []byte(r.value), r.exp); err != nil {
			return st, err
		}
		st.Loaded++
	}
	return st, nil
}

// Count returns the number of keys the stored state holds, expired or not
// (for DBSIZE agreement tests and diagnostics): Restore as of the earliest
// time, counting. O(keys) time and memory. Safe for concurrent use.
func (db *DB) Count() (int64, error) {
	st, err := db.Restore(math.MinInt64, func([]byte, []byte, int64) error { return nil })
	if err != nil {
		return 0, fmt.Errorf("persist: count %s: %w", db.dir, err)
	}
	return st.Loaded, nil
}
