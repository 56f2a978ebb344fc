package main

import (
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/celld/celld/gcra"
	"github.com/celld/celld/persist"
	"github.com/celld/celld/store"
	"github.com/celld/celld/window"
)

// openBenchPersistence opens dir with a store that tracks dirty keys and a
// flusher that only runs when asked (FlushNow), as SAVE and shutdown do.
// The caller closes it.
func openBenchPersistence(dir string) (*persistence, error) {
	db, err := persist.Open(dir, persist.Options{Logger: quietLog()})
	if err != nil {
		return nil, err
	}
	p := &persistence{db: db, st: store.New(store.Options{TrackDirty: true}), log: quietLog()}
	p.fl = persist.NewFlusher(db, persist.FlusherConfig{Interval: time.Hour, Encode: p.encode, Logger: quietLog()})
	return p, nil
}

// benchKeys returns n keys user:0000000 … .
func benchKeys(n int) [][]byte {
	keys := make([][]byte, n)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "user:%07d", i)
	}
	return keys
}

// benchFlush makes n keys dirty with CL.THROTTLE (untimed), then times one
// synced flush of them: the store's Drain, the flusher, and the pebble
// batch on the real disk.
func benchFlush(b *testing.B, n int) {
	p, err := openBenchPersistence(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	keys := benchKeys(n)
	lim, err := gcra.NewLimit(100_000, 1, 3600)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	var cpu int64
	for b.Loop() {
		b.StopTimer()
		now := time.Now().UnixNano()
		for _, k := range keys {
			p.st.Throttle(k, lim, 1, now)
		}
		b.StartTimer()
		c0 := processCPUNs()
		if err := p.fl.FlushNow(); err != nil {
			b.Fatal(err)
		}
		cpu += processCPUNs() - c0
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/key")
	b.ReportMetric(float64(cpu)/float64(b.N)/float64(n), "cpu-ns/key")
}

// BenchmarkFlush10kDirty is the cost of one flush window with 10,000 dirty
// keys.
func BenchmarkFlush10kDirty(b *testing.B) { benchFlush(b, 10_000) }

// BenchmarkFlush1MDirty is the final flush of a shutdown in the worst case:
// 1,000,000 keys changed since the last window.
func BenchmarkFlush1MDirty(b *testing.B) { benchFlush(b, 1_000_000) }

var restore1M struct {
	once sync.Once
	dir  string
	err  error
}

// BenchmarkRestore1M is start-up restore of 1,000,000 CL.THROTTLE keys from
// a real directory into a fresh store (persist's scan plus store.Load).
// The directory is built once per test binary run and removed by TestMain.
func BenchmarkRestore1M(b *testing.B) {
	const n = 1_000_000
	restore1M.once.Do(func() {
		restore1M.dir, restore1M.err = os.MkdirTemp("", "celld-restore-bench-")
		if restore1M.err != nil {
			return
		}
		var p *persistence
		if p, restore1M.err = openBenchPersistence(restore1M.dir); restore1M.err != nil {
			return
		}
		lim, _ := gcra.NewLimit(10, 1, 3600*24*365)
		now := time.Now().UnixNano()
		for _, k := range benchKeys(n) {
			p.st.Throttle(k, lim, 1, now)
		}
		restore1M.err = p.Close()
	})
	if restore1M.err != nil {
		b.Fatal(restore1M.err)
	}
	b.ReportAllocs()
	for b.Loop() {
		db, err := persist.Open(restore1M.dir, persist.Options{Logger: quietLog()})
		if err != nil {
			b.Fatal(err)
		}
		p := &persistence{db: db, st: store.New(store.Options{TrackDirty: true}), log: quietLog()}
		if err := p.load(time.Now()); err != nil {
			b.Fatal(err)
		}
		if p.restoredKeys != n {
			b.Fatalf("restored %d keys, want %d", p.restoredKeys, n)
		}
		b.StopTimer()
		db.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/key")
}

// BenchmarkFlush10kDirtyStrings is BenchmarkFlush10kDirty for SET's
// 100-byte values: the drain views each text, the encoder copies it.
func BenchmarkFlush10kDirtyStrings(b *testing.B) {
	p, err := openBenchPersistence(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	keys := benchKeys(10_000)
	val := make([]byte, 100)
	for i := range val {
		val[i] = 'v'
	}
	b.ReportAllocs()
	var cpu int64
	for b.Loop() {
		b.StopTimer()
		now := time.Now().UnixMilli()
		for _, k := range keys {
			p.st.Put(k, store.StringValue(val), now, store.PutAlways, false)
		}
		b.StartTimer()
		c0 := processCPUNs()
		if err := p.fl.FlushNow(); err != nil {
			b.Fatal(err)
		}
		cpu += processCPUNs() - c0
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/10_000, "ns/key")
	b.ReportMetric(float64(cpu)/float64(b.N)/10_000, "cpu-ns/key")
}

// benchFold fills a store with n keys (put writes the i-th, untimed), then
// times base rewrites (folds) of it: the snapshot's DumpShard walk, the
// encoding and the base file's writes and syncs, as the flusher's fold
// goroutine runs them.
func benchFold(b *testing.B, n int, put func(st *store.Store, key []byte, nowMs int64)) {
	p, err := openBenchPersistence(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	now := time.Now().UnixMilli()
	for _, k := range benchKeys(n) {
		put(p.st, k, now)
	}
	if err := p.fl.FlushNow(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	c0 := processCPUNs()
	for b.Loop() {
		st, err := p.db.WriteBase(func(w *persist.BaseWriter) error { return p.snapshot(now, w) })
		if err != nil {
			b.Fatal(err)
		}
		if st.Keys != int64(n) {
			b.Fatalf("fold wrote %d keys, want %d", st.Keys, n)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/key")
	b.ReportMetric(float64(processCPUNs()-c0)/float64(b.N)/float64(n), "cpu-ns/key")
}

// BenchmarkFold1MStrings is a fold of 1M keys holding SET's 100-byte values
// (verbatim texts: each one a cold heap string).
func BenchmarkFold1MStrings(b *testing.B) {
	val := make([]byte, 100)
	for i := range val {
		val[i] = 'v'
	}
	benchFold(b, 1_000_000, func(st *store.Store, k []byte, now int64) {
		st.Put(k, store.StringValue(val), now, store.PutAlways, false)
	})
}

// BenchmarkFold1MTATs is a fold of 1M CL.THROTTLE keys (plain TATs).
func BenchmarkFold1MTATs(b *testing.B) {
	lim, err := gcra.NewLimit(100_000, 1, 3600)
	if err != nil {
		b.Fatal(err)
	}
	benchFold(b, 1_000_000, func(st *store.Store, k []byte, now int64) {
		st.Throttle(k, lim, 1, now*1e6)
	})
}

// BenchmarkFold1MFixed is a fold of 1M CL.WINDOW FIXED keys (12-byte
// names, so their counters are inline in the entry), beside
// BenchmarkFold1MTATs: the base rewrite's cost per window key.
func BenchmarkFold1MFixed(b *testing.B) {
	l := window.Limit{Mode: window.Fixed, Limit: 100, WindowMs: 3_600_000}
	benchFold(b, 1_000_000, func(st *store.Store, k []byte, now int64) {
		st.Window(k, l, 1, now)
	})
}

// benchEncode makes n keys dirty (put writes the i-th, untimed), then
// times one window's drain and encoding of them into the change log's
// buffer (the flusher's Encode), without the write: the CPU a window
// spends per changed key before the disk.
func benchEncode(b *testing.B, n int, put func(st *store.Store, key []byte, nowMs int64)) {
	p, err := openBenchPersistence(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	keys := benchKeys(n)
	var e persist.Encoder
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		now := time.Now().UnixMilli()
		for _, k := range keys {
			put(p.st, k, now)
		}
		e.Reset()
		b.StartTimer()
		p.encode(now, &e)
	}
	if e.Len() != n {
		b.Fatalf("encoded %d changes, want %d", e.Len(), n)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/key")
}

// BenchmarkEncode100kStrings is a window of 100,000 SETs of 100-byte
// values (verbatim texts) drained and encoded.
func BenchmarkEncode100kStrings(b *testing.B) {
	val := make([]byte, 100)
	for i := range val {
		val[i] = 'v'
	}
	benchEncode(b, 100_000, func(st *store.Store, k []byte, now int64) {
		st.Put(k, store.StringValue(val), now, store.PutAlways, false)
	})
}

// BenchmarkEncode100kTATs is a window of 100,000 CL.THROTTLE keys
// (plain TATs) drained and encoded.
func BenchmarkEncode100kTATs(b *testing.B) {
	lim, err := gcra.NewLimit(100_000, 1, 3600)
	if err != nil {
		b.Fatal(err)
	}
	benchEncode(b, 100_000, func(st *store.Store, k []byte, now int64) {
		st.Throttle(k, lim, 1, now*1e6)
	})
}
