package persist

import (
	"errors"
	"fmt"
	iofs "io/fs"
	"math"
	"slices"
	"sync/atomic"
	"time"
)

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
	var deletes int64
	for i := range ops {
		if ops[i].Delete {
			deletes++
		}
	}
	err := db.commitLocked(buf, seq, records, deletes, stamp, len(ops))
	if cap(buf) <= logBufRetain {
		db.mu.logBuf = buf[:0]
	} else {
		db.mu.logBuf = nil
	}
	return err
}

// commitLocked appends buf, records sealed from seq on (stamped stamp,
// holding nops changes of which deletes are deletions), to the change log
// and syncs it, then counts them (log bytes, deletions, the flush time).
// It is the one tail of Write and WriteEncoded. Seqs are taken even when
// it fails (its records, or its file, may have reached the disk).
// Requires db.mu.
func (db *DB) commitLocked(buf []byte, seq uint64, records int, deletes, stamp int64, nops int) error {
	db.mu.nextSeq = seq + uint64(records)
	if err := db.appendLocked(buf, seq); err != nil {
		return fmt.Errorf("persist: write %d ops to %s: %w", nops, db.dir, err)
	}
	db.mu.logBytes += int64(len(buf) - records*recordHeaderLen)
	db.logBytes.Store(db.mu.logBytes)
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
// window; a bigger one (e.g. a shutdown flush) is left to the GC. A busy
// window of SETs of 100-byte values (~33k keys) encodes to ~4.3 MB: at
// 4 MiB the buffer was dropped and allocated again (zeroed) every window.
// The Flusher drops it when changes stop (dropBuffers); under
// --maxmemory the server's windows are written in pieces that keep it
// within the share of the bound reserved for them.
const logBufRetain = 16 << 20

// LogBytes returns the size of the log written since the base, as far as
// this DB knows (Replay counts what it read; Write adds). Safe for
// concurrent use; O(1), one atomic load: INFO and metrics never wait for a
// write or a base rewrite in progress.
func (db *DB) LogBytes() int64 { return db.logBytes.Load() }

// BaseBytes returns the size of the current base file. Safe for concurrent
// use; O(1).
func (db *DB) BaseBytes() int64 { return db.baseBytes.Load() }

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
	f     *baseFile
	abort *atomic.Bool
	buf   []byte // chunks encoded and not yet written
	dbid  uint32 // the database the next Adds are in (SetDB)
	cuts  []int  // ends of the complete chunks in buf
	keys  int64
	// err is the first failure of Spill: WriteBase treats it as the
	// write's, whatever fill makes of it, and Spill does not write again.
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

// AddVerbatim is Add for a value known not to be a canonical decimal (a
// string the store keeps verbatim: store.Change.Verbatim), written as an
// 's' entry without testing it for one (see Op.Verbatim). key and value
// are copied.
func (w *BaseWriter) AddVerbatim(key, value []byte, expireAtMs int64) {
	w.buf = appendDBPrefix(w.buf, w.dbid)
	w.buf = appendText(w.buf, key, value, expireAtMs)
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

// Spill writes the complete chunks encoded so far to the base file (one
// checksummed record each, through a 256 KiB buffer: a write system call
// per 256 KiB) and keeps the partial one. Call it between Adds without
// holding locks the data path needs, e.g. after each store shard, so the
// base is streamed to disk instead of built whole in memory.
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
		if err := w.f.chunk(w.buf[start:end]); err != nil {
			w.err = err
			return err
		}
		start = end
	}
	w.buf = w.buf[:copy(w.buf, w.buf[start:])]
	w.cuts = w.cuts[:0]
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
// WriteBase does not hold the change log's lock while fill runs or the
// file is written: Writes go on beside it, into new change files. It holds
// the base lock throughout (a concurrent WriteBase, Replay or Close
// waits). Cost: one pass over the state, one sequential write of it, one
// fsync of the file and one of the directory. On any failure the temp file
// is removed and the old base and log stay in charge; fill's own error is
// returned as is. After AbortBases (or Close) it fails with ErrAborted at
// its next chunk.
func (db *DB) WriteBase(fill func(w *BaseWriter) error) (BaseStats, error) {
	start := time.Now()
	db.pm.Lock()
	defer db.pm.Unlock()
	if db.abortBase.Load() {
		return BaseStats{}, ErrAborted
	}
	if db.closed.Load() {
		return BaseStats{}, ErrClosed
	}
	// The cut.
	db.mu.Lock()
	cut := db.mu.nextSeq - 1
	db.endChangeFileLocked()
	covered := len(db.mu.files)
	cutLogBytes := db.mu.logBytes
	cutDeletes := db.mu.logDeletes
	db.mu.Unlock()

	stampMs := db.now().UnixMilli()
	bf, err := createBaseFile(db.fs, db.dir, cut, stampMs)
	if err != nil {
		return BaseStats{Duration: time.Since(start)}, fmt.Errorf("persist: write base to %s: %w", db.dir, err)
	}
	w := &BaseWriter{f: bf, abort: &db.abortBase, buf: db.pm.baseBuf[:0]}
	err = fill(w)
	switch {
	case err != nil && w.err != nil:
		err = w.err // a Spill inside fill failed: the write's error
	case err != nil:
		err = errFill{err}
	default:
		err = w.Spill()
	}
	if err == nil {
		err = bf.chunk(w.buf)
	}
	if err == nil && db.abortBase.Load() {
		err = ErrAborted
	}
	var path string
	if err == nil {
		path, err = bf.finish(w.keys, db.syncDir)
	} else {
		bf.abandon()
	}
	st := BaseStats{Keys: w.keys, Bytes: bf.bytes, Chunks: bf.chunks, Duration: time.Since(start)}
	if cap(w.buf) <= 1<<20 {
		db.pm.baseBuf = w.buf[:0]
	}
	if err != nil && path == "" {
		var fe errFill
		if errors.As(err, &fe) {
			return st, fe.err
		}
		if errors.Is(err, ErrAborted) {
			return st, err
		}
		return st, fmt.Errorf("persist: write base to %s: %w", db.dir, err)
	}
	// The new base is in place (its directory entry may not be durable
	// yet if err != nil: then the old base and the change files are kept,
	// so that either name replays the same state).
	old := db.pm.basePath
	db.pm.baseSeq, db.pm.basePath = cut, path
	db.baseBytes.Store(bf.bytes)
	db.needBase.Store(false)
	db.baseKeys.Store(w.keys)
	db.stampFlushed(stampMs)
	db.mu.Lock()
	db.mu.logBytes -= cutLogBytes
	db.logBytes.Store(db.mu.logBytes)
	db.mu.logDeletes -= cutDeletes
	db.logDeletes.Store(db.mu.logDeletes)
	if err != nil {
		db.mu.Unlock()
		db.needBase.Store(true) // the next fold removes what is left
		return st, fmt.Errorf("persist: write base to %s: %w", db.dir, err)
	}
	// The change files listed at the cut hold only records at or below
	// the cut, now covered by the base; later ones stay.
	db.removeChangeFilesLocked(covered)
	db.mu.Unlock()
	if old != "" && old != path {
		if err := db.fs.Remove(old); err != nil && !errors.Is(err, iofs.ErrNotExist) {
			db.log.Warn("persist: cannot remove the replaced base file; the next start removes it", "file", old, "err", err)
		}
	}
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
//
// Replay passes a window key's state as its value; a caller that restores
// windows or databases uses ReplayAll. Object
// entries (hashes, lists, sorted sets: object.go) go to obj, when given,
// with the same rules: an expired one is passed to fn as a deletion.
// Without obj they are reported as ErrCorrupt. Replay flattens the
// databases: it is for callers that know there is only database 0.
func (db *DB) Replay(nowMs int64, fn func(key, value []byte, expireAtMs int64, deleted bool) error, obj ...ObjectFunc) (RestoreStats, error) {
	return db.ReplayAll(nowMs, func(dbid uint32, k, v []byte, exp int64, _ Kind, deleted bool) error {
		if dbid == DBMapID {
			return nil
		}
		return fn(k, v, exp, deleted)
	}, obj...)
}

// ReplayDBs is Replay with each entry's database id (Op.DB), and the
// database mapping (EncodeDBMap) as entries of the pseudo-database DBMapID
// whose value is the mapping (the last one wins).
func (db *DB) ReplayDBs(nowMs int64, fn func(dbid uint32, key, value []byte, expireAtMs int64, deleted bool) error, obj ...ObjectFunc) (RestoreStats, error) {
	return db.ReplayAll(nowMs, func(dbid uint32, k, v []byte, exp int64, _ Kind, deleted bool) error {
		return fn(dbid, k, v, exp, deleted)
	}, obj...)
}

// ReplayAll is Replay with each entry's database id (as ReplayDBs) and
// its value's kind (KindString, or KindWindow for a CL.WINDOW state).
func (db *DB) ReplayAll(nowMs int64, fn entryFunc, obj ...ObjectFunc) (RestoreStats, error) {
	start := time.Now()
	var st RestoreStats
	db.pm.Lock()
	defer db.pm.Unlock()
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.closed.Load() {
		return st, ErrClosed
	}
	var (
		fnErr     error
		fnPanic   any
		fnPanicky bool
	)
	// fn is the caller's code: a panic in it is not pebble's and must not be
	// turned into ErrPebbleFatal. Catch it here, re-raise it below.
	apply := func(dbid uint32, k, v []byte, exp int64, kind Kind, deleted bool) (err error) {
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
		if err := fn(dbid, k, v, exp, kind, deleted); err != nil {
			fnErr = err
			return err
		}
		return nil
	}
	var objApply []ObjectFunc
	if len(obj) > 0 && obj[0] != nil {
		objApply = []ObjectFunc{func(dbid uint32, k []byte, kind byte, image []byte, exp int64) error {
			if exp != 0 && exp <= nowMs {
				return apply(dbid, k, nil, exp, KindString, false) // counted and passed as expired
			}
			st.Loaded++
			if err := obj[0](dbid, k, kind, image, exp); err != nil {
				fnErr = err
				return err
			}
			return nil
		}}
	}
	var bs baseScan
	bs, err := readBaseFile(db.fs, db.pm.basePath, db.pm.baseSeq, func(payload []byte) error {
		st.BaseBytes += int64(len(payload))
		cbErr, formatErr := decodeChunk(payload, apply, objApply...)
		if formatErr != nil {
			// The CRC matched, so this was written: corruption.
			return fmt.Errorf("%w: %s: base %s: %v", ErrCorrupt, db.dir, db.fs.PathBase(db.pm.basePath), formatErr)
		}
		return cbErr
	})
	if err == nil && !fnPanicky {
		db.reportBaseDamage(bs)
		var n int64
		n, err = db.replayChangeFilesLocked(apply, objApply...)
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
		return st, fmt.Errorf("persist: restore from %s: %w", db.dir, err)
	}
	db.mu.logBytes = st.LogBytes
	db.logBytes.Store(st.LogBytes)
	db.baseKeys.Store(st.Loaded) // the base's keys and the log's sets: an estimate
	if st.Expired > 0 {
		db.needBase.Store(true) // only a base rewrite removes them from disk
	}
	return st, nil
}

// reportBaseDamage logs and counts what reading the base found damaged,
// once per DB (Replay may run again: Count, Restore), and asks for a fold,
// which writes a whole base again.
func (db *DB) reportBaseDamage(bs baseScan) {
	if (len(bs.damaged) == 0 && bs.header && bs.trailer) || db.baseDamageSeen {
		return
	}
	db.baseDamageSeen = true
	file := db.fs.PathBase(db.pm.basePath)
	if !bs.header {
		db.log.Warn("persist: the base file's header record is damaged; reading its chunks anyway", "file", file)
	}
	for _, d := range bs.damaged {
		db.log.Warn("persist: skipping a damaged base record (checksum or length does not match); the keys it held are lost, later records are loaded",
			"file", file, "offset", d.off, "bytes", d.len)
		db.damagedRecords.Add(1)
		db.damagedBytes.Add(d.len)
	}
	if !bs.trailer {
		db.log.Warn("persist: the base file ends early (its trailer is missing): it was cut short after it was written; keys after this offset are lost",
			"file", file, "offset", bs.tail.off, "bytes", bs.tail.len)
		db.damagedRecords.Add(1)
		db.damagedBytes.Add(bs.tail.len)
	}
	db.needBase.Store(true)
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
