package persist

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// Reading a directory written by an older celld (formats v1-v4, pebble v2)
// and migrating it to a base file. pebble is opened read-only (no flush,
// no compaction, no WAL or MANIFEST written), read once, closed, and its
// files removed; nothing else in persist calls pebble. Its keys were:
//
//	'b' + gen (8 bytes) + index (4 bytes)  → base chunk of generation gen
//	'm' + "format"      = "celld-persist-v1" … "celld-persist-v4"
//	'm' + "flushed_at"  = Unix ms (8 bytes, big-endian)
//	'm' + "base"        = gen, seq, bytes (3 × 8 bytes, big-endian)
//	'l' + seq (8 bytes) → v3 log chunk, applied after the base if seq > the
//	                      base's seq
//	'k' + raw key       → v1 record: 8-byte big-endian expiry + value,
//	                      applied before the base
const (
	recordPrefix = 'k'
	basePrefix   = 'b'
	logPrefix    = 'l'
	expiryLen    = 8
)

var (
	formatKey  = []byte("mformat")
	flushedKey = []byte("mflushed_at")
	baseKey    = []byte("mbase")
	// legacyFormats are the format stamps a migration accepts.
	legacyFormats = []string{"celld-persist-v4", "celld-persist-v3", "celld-persist-v2", "celld-persist-v1"}
)

// logKey is the pebble key of v3 log chunk seq.
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

// migrate turns the pebble directory described by l into a base file
// holding the same state, in order: v1 records, the base's chunks, then
// the v3 log chunks above the base's seq (entries apply in order, so the
// chunks are copied as they are). The base file's cut is the highest seq
// pebble held; change files above it replay on top as before. Once the
// base file is renamed into place pebble's files are removed (a crash in
// between leaves them for the next Open, which removes them without
// reading them). Open calls it under the directory lock.
func (db *DB) migrate(l dirLayout) error {
	start := time.Now()
	pdb, err := db.openPebbleReadOnly()
	if err != nil {
		return err
	}
	closed := false
	defer func() {
		if !closed {
			_ = callPebble(pdb.Close)
		}
	}()
	var (
		stampMs     int64
		gen, cut    uint64
		legacyKeys  int64
		copied      int64
		bf          *baseFile
		corruptWrap = func(what string, err error) error {
			if pebble.IsCorruptionError(err) || errors.Is(err, ErrCorrupt) {
				return fmt.Errorf("%w: migrate %s: %s: %w (--recover=skip moves the directory aside and starts empty)", ErrCorrupt, db.dir, what, err)
			}
			return fmt.Errorf("persist: migrate %s: %s: %w", db.dir, what, err)
		}
	)
	err = callPebble(func() error {
		v, closer, err := pdb.Get(formatKey)
		switch {
		case errors.Is(err, pebble.ErrNotFound):
			// Created but never stamped (it never held data).
		case err != nil:
			return corruptWrap("read format marker", err)
		default:
			ok := false
			for _, f := range legacyFormats {
				ok = ok || string(v) == f
			}
			if !ok {
				err := fmt.Errorf("%w: %s holds format %q, want one of %q", ErrFormat, db.dir, v, legacyFormats)
				_ = closer.Close()
				return err
			}
			_ = closer.Close()
		}
		if v, closer, err := pdb.Get(flushedKey); err == nil {
			if len(v) == 8 {
				stampMs = int64(binary.BigEndian.Uint64(v))
			} else {
				err = fmt.Errorf("%w: flush time has %d bytes, want 8", ErrCorrupt, len(v))
			}
			_ = closer.Close()
			if err != nil {
				return corruptWrap("read flush time", err)
			}
		} else if !errors.Is(err, pebble.ErrNotFound) {
			return corruptWrap("read flush time", err)
		}
		if v, closer, err := pdb.Get(baseKey); err == nil {
			if len(v) == 24 {
				gen, cut = binary.BigEndian.Uint64(v), binary.BigEndian.Uint64(v[8:])
			} else {
				err = fmt.Errorf("%w: base marker has %d bytes, want 24", ErrCorrupt, len(v))
			}
			_ = closer.Close()
			if err != nil {
				return corruptWrap("read base marker", err)
			}
		} else if !errors.Is(err, pebble.ErrNotFound) {
			return corruptWrap("read base marker", err)
		}
		baseSeq := cut
		// The cut: the highest v3 log seq, if above the base's.
		it, err := pdb.NewIter(&pebble.IterOptions{LowerBound: []byte{logPrefix}, UpperBound: []byte{logPrefix + 1}})
		if err != nil {
			return corruptWrap("list log chunks", err)
		}
		if it.Last() {
			if k := it.Key(); len(k) == 9 {
				cut = max(cut, binary.BigEndian.Uint64(k[1:]))
			}
		}
		if err := it.Close(); err != nil {
			return corruptWrap("list log chunks", err)
		}
		if bf, err = createBaseFile(db.fs, db.dir, cut, stampMs); err != nil {
			return fmt.Errorf("persist: migrate %s: %w", db.dir, err)
		}
		// v1 records, re-encoded into chunks.
		var buf []byte
		if err := scan(pdb, []byte{recordPrefix}, []byte{recordPrefix + 1}, func(k, v []byte) error {
			if len(v) < expiryLen {
				return fmt.Errorf("%w: record %q has a %d-byte value, want at least %d", ErrCorrupt, k[1:], len(v), expiryLen)
			}
			legacyKeys++
			buf = appendSet(buf, k[1:], v[expiryLen:], int64(binary.BigEndian.Uint64(v)))
			if len(buf) >= maxChunk {
				err := bf.chunk(buf)
				buf = buf[:0]
				return err
			}
			return nil
		}); err != nil {
			return corruptWrap("copy v1 records", err)
		}
		if err := bf.chunk(buf); err != nil {
			return err
		}
		copyChunk := func(k, v []byte) error {
			if _, formatErr := decodeChunk(v, func(uint32, []byte, []byte, int64, Kind, bool) error { return nil }); formatErr != nil {
				return fmt.Errorf("%w: chunk %x: %v", ErrCorrupt, k[1:], formatErr)
			}
			copied++
			return bf.chunk(v)
		}
		if gen != 0 {
			if err := scan(pdb, baseChunkKey(gen, 0), baseChunkKey(gen+1, 0), copyChunk); err != nil {
				return corruptWrap("copy base", err)
			}
		}
		if err := scan(pdb, logKey(baseSeq+1), []byte{logPrefix + 1}, copyChunk); err != nil {
			return corruptWrap("copy v3 log", err)
		}
		return nil
	})
	if err != nil {
		if bf != nil {
			bf.abandon()
		}
		if errors.Is(err, ErrPebbleFatal) {
			return fmt.Errorf("persist: migrate %s: %w", db.dir, err)
		}
		return err
	}
	chunks, bytes := bf.chunks, bf.bytes
	if _, err := bf.finish(0, db.syncDir); err != nil {
		return fmt.Errorf("persist: migrate %s: %w", db.dir, err)
	}
	closed = true
	_ = callPebble(pdb.Close)
	db.setBase(cut)
	db.removePebbleFiles(l.pebble)
	// A copied base may hold a key several times (v1 records, v3 log):
	// the next fold writes it once.
	db.needBase.Store(legacyKeys > 0 || chunks > 0)
	db.log.Info("persist: migrated the directory from pebble to a base file",
		"base", db.fs.PathBase(db.pm.basePath), "chunks", chunks, "bytes", bytes, "v1_records", legacyKeys, "took", time.Since(start))
	return nil
}

// removePebbleFiles removes an old directory's pebble files once a base
// file holds their state, the manifest marker last but one and the
// format marker last, then syncs the directory. A file that cannot be
// removed is logged and left for the next Open.
func (db *DB) removePebbleFiles(names []string) {
	rank := func(n string) int {
		switch {
		case strings.HasPrefix(n, "marker.manifest."):
			return 1
		case strings.HasPrefix(n, "marker."):
			return 2
		}
		return 0
	}
	for r := 0; r <= 2; r++ {
		for _, name := range names {
			if rank(name) != r {
				continue
			}
			if err := removeQuietly(db.fs, db.dir, name); err != nil {
				db.log.Warn("persist: cannot remove an old storage-engine file after migration; the next start retries", "file", name, "err", err)
			}
		}
	}
	if err := db.syncDir(); err != nil {
		db.log.Warn("persist: sync after removing old storage-engine files", "err", err)
	}
}

// openPebbleReadOnly opens the old directory's pebble database read-only
// with the lock db holds, waiting at most openTimeout (then the attempt
// is left to finish, and be closed, in the background). Panics (and
// Fatalf) raised by pebble.Open come back as errors.
func (db *DB) openPebbleReadOnly() (*pebble.DB, error) {
	plog := &pebbleLogger{l: db.log}
	popts := &pebble.Options{
		FS:               db.fs,
		Lock:             db.pm.lock,
		Logger:           plog,
		ErrorIfNotExists: true,
		ReadOnly:         true,
		CacheSize:        db.cacheSize,
		EventListener: &pebble.EventListener{
			// pebble's default calls Logger.Fatalf; the error still
			// reaches the reader.
			DataCorruption: func(info pebble.DataCorruptionInfo) {
				db.log.Error("persist: pebble detected data corruption", "path", info.Path, "err", info.Details)
			},
		},
	}
	type result struct {
		pdb *pebble.DB
		err error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		r.err = callPebble(func() error {
			var e error
			r.pdb, e = pebble.Open(db.dir, popts)
			return e
		})
		done <- r
	}()
	timer := time.NewTimer(db.openTimeout)
	defer timer.Stop()
	var r result
	select {
	case r = <-done:
	case <-timer.C:
		go func() {
			if r := <-done; r.pdb != nil {
				_ = callPebble(r.pdb.Close)
			}
		}()
		return nil, fmt.Errorf("%w: open %s: pebble did not open within %v (last pebble error: %s)",
			ErrUnusable, db.dir, db.openTimeout, plog.lastError())
	}
	if r.err != nil {
		err := r.err
		if pebble.IsCorruptionError(err) || errors.Is(err, pebble.ErrDBDoesNotExist) {
			return nil, fmt.Errorf("%w: open %s: %w (--recover=skip moves the directory aside and starts empty)", ErrCorrupt, db.dir, err)
		}
		return nil, fmt.Errorf("persist: open %s: %w", db.dir, err)
	}
	return r.pdb, nil
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

// callPebble runs f, converting a panic (and persist's logger's Fatalf)
// into an error wrapping ErrPebbleFatal.
func callPebble(f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			switch r := r.(type) {
			case pebbleFatal:
				err = fmt.Errorf("%w: %s", ErrPebbleFatal, r.msg)
			case error:
				err = fmt.Errorf("%w: panic: %w", ErrPebbleFatal, r)
			default:
				err = fmt.Errorf("%w: panic: %v", ErrPebbleFatal, r)
			}
		}
	}()
	return f()
}

// pebbleFatal is the panic value raised by pebbleLogger.Fatalf.
type pebbleFatal struct{ msg string }

func (p pebbleFatal) Error() string { return "pebble fatal: " + p.msg }

// pebbleLogger adapts slog to pebble.Logger for a migration. Fatalf
// panics instead of exiting (callPebble recovers it); Errorf logs at most
// one line per second. Safe for concurrent use.
type pebbleLogger struct {
	l    *slog.Logger
	last atomic.Value // string: the latest Errorf text

	mu         sync.Mutex
	lastLogged time.Time
	dropped    int
}

// lastError is the text of pebble's latest logged error, or "none".
func (p *pebbleLogger) lastError() string {
	if v, ok := p.last.Load().(string); ok {
		return v
	}
	return "none"
}

func (p *pebbleLogger) Infof(format string, args ...any) {
	p.l.Debug("pebble: " + strings.TrimRight(fmt.Sprintf(format, args...), "\n"))
}

func (p *pebbleLogger) Errorf(format string, args ...any) {
	msg := strings.TrimRight(fmt.Sprintf(format, args...), "\n")
	p.last.Store(msg)
	p.mu.Lock()
	now := time.Now()
	if now.Sub(p.lastLogged) < time.Second {
		p.dropped++
		p.mu.Unlock()
		return
	}
	dropped := p.dropped
	p.lastLogged, p.dropped = now, 0
	p.mu.Unlock()
	if dropped > 0 {
		p.l.Error("pebble: "+msg, "similar_lines_dropped", dropped)
		return
	}
	p.l.Error("pebble: " + msg)
}

func (p *pebbleLogger) Fatalf(format string, args ...any) {
	msg := strings.TrimRight(fmt.Sprintf(format, args...), "\n")
	p.last.Store(msg)
	p.l.Error("pebble fatal: " + msg)
	panic(pebbleFatal{msg})
}
