package main

import (
	"fmt"
	"testing"
	"time"

	"github.com/celld/celld/gcra"
	"github.com/celld/celld/persist"
	"github.com/celld/celld/store"
)

// TestWindowPiecesUnderBound (#25): under --maxmemory a window's changes
// are drained and written in pieces of at most pieceOps ops (plus one
// store shard's changes), so the buffers a window holds (the ops, their
// key block, their encoding) stay within the share of the bound reserved
// for persistence however many changes a window gathered: here 200,000
// changed keys in two databases, where one piece is 32,768 ops at 64 MB.
// Every change still reaches the disk by the end of the flush, and
// without a bound a window is one piece, as before.
//
// loop=on runs the drain as the server does, on the event loop
// (persistence.onLoop, here a goroutine standing in for it) in slices of
// at most loopSliceOps changes (plus one shard's), with the same pieces;
// loop=refusing has the second slice of each piece refused (the loop did
// not start it in time): the flusher drains it and the rest of the piece
// itself.
func TestWindowPiecesUnderBound(t *testing.T) {
	const bound = 64 << 20
	limit := pieceOps(bound)
	if limit*bytesPerPieceOp > int(persistReserve(bound)) {
		t.Fatalf("pieces of %d ops (%d B each) do not fit the reserve of %d B", limit, bytesPerPieceOp, persistReserve(bound))
	}
	for _, c := range []struct {
		bounded bool
		loop    string
	}{{true, "off"}, {false, "off"}, {true, "on"}, {false, "on"}, {true, "refusing"}, {false, "refusing"}} {
		bounded := c.bounded
		t.Run(fmt.Sprintf("bounded=%v/loop=%s", bounded, c.loop), func(t *testing.T) {
			dir := t.TempDir()
			db, err := persist.Open(dir, persist.Options{Logger: quietLog()})
			if err != nil {
				t.Fatal(err)
			}
			p := &persistence{db: db, st: store.New(store.Options{TrackDirty: true}), log: quietLog()}
			var pieces []int
			var slices []int // changes each slice run on the "loop" took
			var sliceE *persist.Encoder
			p.fl = persist.NewFlusher(db, persist.FlusherConfig{
				Interval: time.Hour,
				Encode: func(nowMs int64, e *persist.Encoder) bool {
					sliceE = e
					more := p.encodePiece(nowMs, e)
					pieces = append(pieces, e.Len())
					return more
				},
				Logger: quietLog(),
			})
			if bounded {
				p.st.SetMaxMemory(bound)
			}
			if c.loop != "off" {
				calls := 0
				run := func(fn func()) bool {
					calls++
					if c.loop == "refusing" && calls%2 == 0 {
						return false // the flusher drains this slice itself
					}
					before := sliceE.Len()
					done := make(chan struct{})
					go func() { defer close(done); fn() }()
					<-done
					slices = append(slices, sliceE.Len()-before)
					return true
				}
				p.onLoop.Store(&run)
			}
			lim, err := gcra.NewLimit(100, 1, 3600)
			if err != nil {
				t.Fatal(err)
			}
			now := time.Now().UnixNano()
			const n0, n3 = 150_000, 50_000
			db3 := p.databases().DB(3)
			for i := range n0 {
				p.st.Throttle(fmt.Appendf(nil, "user:%07d", i), lim, 1, now)
			}
			for i := range n3 {
				db3.Throttle(fmt.Appendf(nil, "db3:%07d", i), lim, 1, now)
			}
			if err := p.fl.FlushNow(); err != nil {
				t.Fatal(err)
			}
			total, biggest := 0, 0
			for _, n := range pieces {
				total += n
				biggest = max(biggest, n)
			}
			if total != n0+n3 {
				t.Errorf("pieces %v drained %d changes, want %d", pieces, total, n0+n3)
			}
			// A piece passes the limit by at most one shard's changes.
			slack := 2 * max(n0, n3) / store.NumShards
			switch {
			case bounded && (biggest > limit+slack || len(pieces) < (n0+n3)/(limit+slack)):
				t.Errorf("under a %d MB bound the window was drained in pieces %v; want none over %d+%d", bound>>20, pieces, limit, slack)
			case !bounded && len(pieces) != 1:
				t.Errorf("without a bound the window was drained in pieces %v; want one", pieces)
			}
			sliced := 0
			for _, n := range slices {
				sliced += n
				if n > loopSliceOps+slack {
					t.Errorf("a slice on the loop took %d changes; want at most %d+%d", n, loopSliceOps, slack)
				}
			}
			switch {
			case c.loop == "on" && sliced != n0+n3:
				t.Errorf("slices on the loop %v took %d changes, want all %d", slices, sliced, n0+n3)
			case c.loop == "refusing" && (sliced == 0 || sliced >= n0+n3):
				t.Errorf("slices on the loop took %d of %d changes with every other one refused", sliced, n0+n3)
			}
			if st := p.fl.Status(); bounded && st.Flushes != int64(len(pieces)) {
				t.Errorf("%d pieces written in %d flushes", len(pieces), st.Flushes)
			}
			if got := p.databases().DirtyKeys(); got != 0 {
				t.Errorf("%d changes left dirty after FlushNow", got)
			}
			if err := p.Close(); err != nil {
				t.Fatal(err)
			}
			db, err = persist.Open(dir, persist.Options{Logger: quietLog()})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if keys, err := db.Count(); err != nil || keys != n0+n3 {
				t.Errorf("on disk: %d keys (%v), want %d", keys, err, n0+n3)
			}
		})
	}
}

// TestVerbatimTextsRoundTrip: strings the store keeps verbatim (texts
// that are not a number's canonical decimal) go to the log and to a base
// as 's' entries without being tested for a number (store.Change.
// Verbatim, persist.Op.Verbatim), and come back byte for byte, next to
// canonical numbers, which stay 8-byte TATs; through the log alone and
// through a fold.
func TestVerbatimTextsRoundTrip(t *testing.T) {
	texts := map[string]string{
		"plus": "+5", "zeros": "007", "neg": "-3", "word": "abc", "mixed": "123abc",
		"big": "18446744073709551616", "empty": "", "bin": "\x00\xff\r\n", "long": string(make([]byte, 300)),
		"num": "42", "max": "18446744073709551615", "zero": "0",
	}
	for _, fold := range []bool{false, true} {
		t.Run(fmt.Sprintf("fold=%v", fold), func(t *testing.T) {
			dir := t.TempDir()
			p, err := openBenchPersistence(dir)
			if err != nil {
				t.Fatal(err)
			}
			now := time.Now().UnixMilli()
			for k, v := range texts {
				if _, err := p.st.Put([]byte(k), store.StringValue([]byte(v)), now, store.PutAlways, false); err != nil {
					t.Fatal(err)
				}
			}
			if err := p.fl.FlushNow(); err != nil {
				t.Fatal(err)
			}
			if fold {
				if _, err := p.db.WriteBase(func(w *persist.BaseWriter) error { return p.snapshot(now, w) }); err != nil {
					t.Fatal(err)
				}
			}
			if err := p.Close(); err != nil {
				t.Fatal(err)
			}
			q, err := openBenchPersistence(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer q.Close()
			if err := q.load(time.Now()); err != nil {
				t.Fatal(err)
			}
			for k, want := range texts {
				v, ok := q.st.Get([]byte(k), now)
				if got := string(v.AppendText(nil)); !ok || got != want {
					t.Errorf("%s restored as %q (found %v), want %q", k, got, ok, want)
				}
			}
		})
	}
}
