package persist

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Database 0's entries are byte-for-byte what they were before databases
// existed; another database's entry is the same bytes behind a 'D' id
// prefix; the mapping round-trips.
func TestDatabaseEntries(t *testing.T) {
	ops := []Op{
		{Key: []byte("k"), IsTAT: true, TAT: 1 << 60, ExpireAtMs: 77},
		{Key: []byte("s"), Value: []byte("+5")},
		{Key: []byte("d"), Delete: true},
	}
	// Database 0: the v4 encoding, hand-built.
	var want []byte
	want = append(want, 't', 1, 'k')
	want = binary.AppendVarint(want, 77)
	want = binary.LittleEndian.AppendUint64(want, 1<<60)
	want = append(want, 's', 1, 's', 0, 2, '+', '5')
	want = append(want, 'd', 1, 'd')
	var got []byte
	for i := range ops {
		got = appendEntry(got, &ops[i])
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("database 0 encoding changed:\n got %x\nwant %x", got, want)
	}
	// Databases 3 and 300: prefixed, sizes agree with entrySize.
	var chunk []byte
	for _, db := range []uint32{3, 300, 0} {
		for i := range ops {
			op := ops[i]
			op.DB = db
			before := len(chunk)
			chunk = appendEntry(chunk, &op)
			if n := len(chunk) - before; n != entrySize(&op) {
				t.Errorf("db %d op %d: %d bytes, entrySize %d", db, i, n, entrySize(&op))
			}
		}
	}
	mapOp := Op{DB: DBMapID, Value: EncodeDBMap([]uint32{1, 0, 2})}
	chunk = appendEntry(chunk, &mapOp)
	var seen []string
	_, ferr := decodeChunk(chunk, func(db uint32, k, v []byte, exp int64, _ Kind, deleted bool) error {
		if db == DBMapID {
			perm, err := DecodeDBMap(v)
			seen = append(seen, fmt.Sprintf("map %v %v", perm, err))
			return nil
		}
		seen = append(seen, fmt.Sprintf("%d/%s=%s/%d/%v", db, k, v, exp, deleted))
		return nil
	})
	if ferr != nil {
		t.Fatal(ferr)
	}
	wantSeen := fmt.Sprintf("%v", []string{
		"3/k=1152921504606846976/77/false", "3/s=+5/0/false", "3/d=/0/true",
		"300/k=1152921504606846976/77/false", "300/s=+5/0/false", "300/d=/0/true",
		"0/k=1152921504606846976/77/false", "0/s=+5/0/false", "0/d=/0/true",
		"map [1 0 2] <nil>",
	})
	if fmt.Sprintf("%v", seen) != wantSeen {
		t.Errorf("decoded %v\nwant %v", seen, wantSeen)
	}
	// Malformed prefixes are format errors, not panics.
	for _, bad := range [][]byte{{'D'}, {'D', 0, 'd', 1, 'x'}, {'D', 3}, {'D', 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}} {
		if _, ferr := decodeChunk(bad, func(uint32, []byte, []byte, int64, Kind, bool) error { return nil }); ferr == nil {
			t.Errorf("chunk %x decoded without error", bad)
		}
	}
	for _, bad := range [][]byte{{}, {5, 1}, {1, 0, 0}} {
		if _, err := DecodeDBMap(bad); err == nil {
			t.Errorf("mapping %x decoded without error", bad)
		}
	}
}

// A key written in two databases is two keys, through the flusher's
// pending set (a failing disk), the log and the replay.
func TestDatabasesSameKeyTwoDatabases(t *testing.T) {
	db := mustOpen(t, "data", Options{FS: vfs.NewMem()})
	if err := db.Write([]Op{
		{Key: []byte("k"), Value: []byte("1")},
		{Key: []byte("k"), Value: []byte("2"), DB: 2},
		{Key: []byte("j"), Value: []byte("3"), DB: 2},
		{Key: []byte("j"), Delete: true, DB: 2},
	}); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	if _, err := db.ReplayDBs(0, func(dbid uint32, k, v []byte, _ int64, deleted bool) error {
		key := fmt.Sprintf("%d/%s", dbid, k)
		if deleted {
			delete(got, key)
		} else {
			got[key] = string(v)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != "map[0/k:1 2/k:2]" {
		t.Errorf("replayed %v", got)
	}
	if n, err := db.Count(); err != nil || n != 2 {
		t.Errorf("Count = %d, %v, want 2", n, err)
	}
	f := &Flusher{pending: map[pendingKey]Op{}}
	for _, op := range []Op{{Key: []byte("k"), Value: []byte("1")}, {Key: []byte("k"), Value: []byte("2"), DB: 2}, {Key: []byte("k"), Value: []byte("3"), DB: 2}} {
		f.putPendingLocked(&op)
	}
	if len(f.pending) != 2 || string(f.pending[pendingKey{2, "k"}].Value) != "3" || string(f.pending[pendingKey{0, "k"}].Value) != "1" {
		t.Errorf("pending %v", f.pending)
	}
}
