package repl

import (
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/celld/celld/kinds"
	"github.com/celld/celld/store"
	"github.com/celld/celld/window"
)

// TestApplyMixedPayload: a batch interleaving plain TATs with every other
// kind of entry (deletes, strings, windows, objects) across databases,
// with a key written several times, leaves the follower as applying each
// entry in order with ApplyChange does (the reference path). apply decodes
// a plain TAT into a small ent and any other entry again from its offset:
// a wrong offset or an entry applied out of order shows here.
func TestApplyMixedPayload(t *testing.T) {
	nowMs := time.Now().UnixMilli()
	exp := nowMs + 60_000
	h := kinds.NewHash()
	h.Set("f", "v")
	h.Set("g", "w")
	var img []byte
	img = h.AppendImage(img)
	changes := []struct {
		db int
		c  store.Change
	}{
		{0, store.Change{Key: []byte("a"), TAT: 10, IsTAT: true, ExpireAtMs: exp}},
		{1, store.Change{Key: []byte("s"), Text: []byte("hello"), ExpireAtMs: exp}},
		{0, store.Change{Key: []byte("a"), TAT: 20, IsTAT: true}},
		{2, store.Change{Key: []byte("h"), Kind: store.KindHash, Image: img}},
		{0, store.Change{Key: []byte("b"), TAT: 30, IsTAT: true, ExpireAtMs: exp}},
		{0, store.Change{Key: []byte("b"), Deleted: true}},
		{3, store.Change{Key: []byte("c"), TAT: 40, IsTAT: true}},
		{1, store.Change{Key: []byte("s"), Text: []byte("again")}},
		{0, store.Change{Key: []byte("a"), TAT: 5, IsTAT: true, ExpireAtMs: exp}}, // a refund: the stream replaces
		{3, store.Change{Key: []byte("gone"), TAT: 50, IsTAT: true, ExpireAtMs: nowMs - 1_000}},
	}
	for i := 0; i < 70; i++ { // more than one prefetch chunk
		changes = append(changes, struct {
			db int
			c  store.Change
		}{i % 4, store.Change{Key: fmt.Appendf(nil, "k%d", i%23), TAT: uint64(1000 + i), IsTAT: true, ExpireAtMs: exp}})
		if i%9 == 0 {
			changes = append(changes, struct {
				db int
				c  store.Change
			}{i % 4, store.Change{Key: fmt.Appendf(nil, "k%d", i%23), Text: fmt.Appendf(nil, "text%d", i)}})
		}
	}
	var p []byte
	for _, e := range changes {
		p = appendEntry(p, e.db, e.c)
	}

	got, want := newDBs(t), newDBs(t)
	f := newFollower(New(got, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}), 1, "")
	if err := f.apply(p, false, nil); err != nil {
		t.Fatal(err)
	}
	if len(f.ents) != len(changes) {
		t.Fatalf("apply counted %d entries, want %d", len(f.ents), len(changes))
	}
	d := decoder{b: p}
	for len(d.b) > 0 {
		db, c := d.entry()
		if d.err != nil {
			t.Fatal(d.err)
		}
		var obj store.Object
		if !c.Deleted && c.Kind == store.KindHash {
			o, err := decodeObject(c.Kind, c.Image)
			if err != nil {
				t.Fatal(err)
			}
			obj = o
		}
		if err := want.DB(db).ApplyChange(c, obj, false, nowMs); err != nil {
			t.Fatal(err)
		}
	}
	g, w := dump(got), dump(want)
	if fmt.Sprint(g) != fmt.Sprint(w) {
		t.Fatalf("apply left\n%v\nwant\n%v", g, w)
	}
	if v, ok := got.DB(0).Get([]byte("a"), nowMs); !ok || v.TAT != 5 {
		t.Fatalf("a: %v %v, want the last TAT 5", v.TAT, ok)
	}
	if _, ok := got.DB(0).Get([]byte("b"), nowMs); ok {
		t.Fatal("b survived its delete")
	}
	if len(w) < 25 {
		t.Fatalf("only %d keys: the reference applied too little", len(w))
	}
}

// TestApplyDropsDamagedWindowState: a change whose CL.WINDOW state this
// node refuses (store.ErrWindowState: a state an older leader loaded
// damaged and answers "damaged" for) no longer stops the stream: the key
// is dropped here, counted (Status.DroppedDamaged), and the entries after
// it apply. Before, apply failed and the follower retried the sync
// without end, with no key replicating any more.
func TestApplyDropsDamagedWindowState(t *testing.T) {
	nowMs := time.Now().UnixMilli()
	exp := nowMs + 60_000
	good := binary.AppendVarint([]byte{byte(window.Log)}, nowMs) // a plain LOG state: one unit now
	good = append(good, 1)
	damaged := []byte{4, 9, 9, 9} // a header of 9 entries, and none
	var first, p []byte
	first = appendEntry(first, 0, store.Change{Key: []byte("w"), Kind: store.KindWindow, Text: good, ExpireAtMs: exp})
	first = appendEntry(first, 0, store.Change{Key: []byte("a"), TAT: 10, IsTAT: true, ExpireAtMs: exp})
	p = appendEntry(p, 0, store.Change{Key: []byte("w"), Kind: store.KindWindow, Text: damaged, ExpireAtMs: exp})
	p = appendEntry(p, 1, store.Change{Key: []byte("b"), TAT: 20, IsTAT: true, ExpireAtMs: exp})

	got := newDBs(t)
	f := newFollower(New(got, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}), 1, "")
	if err := f.apply(first, false, nil); err != nil {
		t.Fatal(err)
	}
	if d := dump(got); len(d) != 2 || !strings.Contains(d[0]+d[1], `"w" cl.window`) {
		t.Fatalf("before the damaged change: %v, want a and the window w", d)
	}
	if err := f.apply(p, false, nil); err != nil {
		t.Fatalf("apply stopped on the damaged state: %v", err)
	}
	d := dump(got)
	if len(d) != 2 || strings.Contains(fmt.Sprint(d), `"w"`) || !strings.Contains(fmt.Sprint(d), `"b"`) {
		t.Fatalf("after: %v, want a and b, w dropped", d)
	}
	var st Status
	f.status(&st)
	if st.DroppedDamaged != 1 {
		t.Fatalf("DroppedDamaged %d, want 1", st.DroppedDamaged)
	}
}
