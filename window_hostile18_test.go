package main

import (
	"context"
	binenc "encoding/binary"
	"path/filepath"
	"strings"
	"testing"

	"github.com/celld/celld/persist"
)

// writeWindowDir writes a data directory whose base file holds the given
// CL.WINDOW states byte for byte (no expiry): what a disk, a copy of a
// data directory or an older celld may hand a restore, checksums intact.
func writeWindowDir(t testing.TB, dir string, keys []string, states [][]byte) {
	t.Helper()
	db, err := persist.Open(dir, persist.Options{Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.WriteBase(func(w *persist.BaseWriter) error {
		for i, k := range keys {
			w.AddWindow([]byte(k), states[i], 0)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// plainLog is a plain (mode byte 1) LOG state: the first entry at t0 with
// count c[0], each later one gaps[i-1] ms after the previous.
func plainLog(t0 int64, c []uint64, gaps []uint64) []byte {
	b := binenc.AppendVarint([]byte{1}, t0)
	b = binenc.AppendUvarint(b, c[0])
	for i := 1; i < len(c); i++ {
		b = binenc.AppendUvarint(b, gaps[i-1])
		b = binenc.AppendUvarint(b, c[i])
	}
	return b
}

// TestWindowDamageRecoverSkip: a data directory whose checksums hold
// but whose CL.WINDOW state does not decode (a LOG header that does not
// match its entries: a damaged disk, a copy edited by hand) makes celld
// refuse to start, naming the key, as any unreadable data does; and
// --recover=skip, the way out the refusal names for unreadable data, then
// starts empty with the directory's contents moved aside. Before the fix
// the refusal was not "unreadable" (ErrWindowState is not a
// persist.ErrCorrupt) and --recover=skip refused too: no way to start.
func TestWindowDamageRecoverSkip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	good := plainLog(1_700_000_000_000, []uint64{3, 2}, []uint64{10})
	// header: 2 entries, 9 units (they hold 5), span 10, then t₀ and the entries
	bad := append([]byte{4, 2, 9, 10}, good[1:]...)
	writeWindowDir(t, dir, []string{"good", "bad"}, [][]byte{good, bad})

	c := launch(t, dir)
	if !c.hasExited() {
		c.kill()
		t.Fatalf("celld started on a damaged window state; log:\n%s", c.logs)
	}
	if log := c.logs.String(); c.cmd.ProcessState.ExitCode() == 0 || !strings.Contains(log, `window key \"bad\"`) {
		t.Fatalf("refusal: exit %d, want non-zero and the key named:\n%s", c.cmd.ProcessState.ExitCode(), log)
	}
	c = mustLaunch(t, dir, "--recover=skip")
	defer c.termOK()
	if log := c.logs.String(); !strings.Contains(log, "starting EMPTY") {
		t.Errorf("--recover=skip did not say it starts empty:\n%s", log)
	}
	rdb := c.client()
	defer rdb.Close()
	if n, err := rdb.DBSize(context.Background()).Result(); err != nil || n != 0 {
		t.Errorf("DBSIZE after --recover=skip = %d, %v; want 0", n, err)
	}
	if aside, _ := filepath.Glob(filepath.Join(dir, "unreadable-*")); len(aside) != 1 {
		t.Errorf("moved-aside directories: %v, want one", aside)
	}
}
