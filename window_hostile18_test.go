package main

import (
	"context"
	binenc "encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

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

// windowGoldenFile holds the replies main at f3c96f0 (the LOG format
// without the header, /tmp/bis/celld-base18) gave to windowDiffScript's
// calls, one line each. Regenerate with
// CELLD_WINDOW_GOLDEN_BIN=/tmp/bis/celld-base18 go test -run TestWindowLogRepliesAsMain .
const windowGoldenFile = "testdata/window-log-replies-f3c96f0.txt"

// windowDiffStates are the LOG states (plain format, as main wrote them)
// of windowDiffScript's keys: n entries of random counts and gaps whose
// newest unit lies in 2096, after any real now, so every call is decided
// as of that unit (a clock step back: the spec's "decide as of the newest
// unit") and the replies do not depend on when the test runs. Entries
// counts: 1, 2, a few, 127/128 (the one-byte header's edge), 1023-1100
// (MaxLogEntries and a state above it, which main could load).
func windowDiffStates(rng *rand.Rand) (keys []string, states [][]byte) {
	sizes := []int{1, 1, 2, 3, 5, 10, 50, 127, 128, 129, 300, 1023, 1024, 1100}
	for i := range 48 {
		n := sizes[rng.IntN(len(sizes))]
		c := make([]uint64, n)
		gaps := make([]uint64, max(n-1, 0))
		span := int64(0)
		for j := range c {
			switch rng.IntN(8) {
			case 0:
				c[j] = 1 + rng.Uint64N(5000)
			case 1:
				c[j] = 1 << (30 + rng.IntN(20))
			case 2, 3:
				c[j] = 1 + rng.Uint64N(127)
			default:
				c[j] = 1 + rng.Uint64N(3)
			}
		}
		for j := range gaps {
			switch rng.IntN(6) {
			case 0:
				gaps[j] = 128 + rng.Uint64N(100_000)
			case 1:
				gaps[j] = 100_000 + rng.Uint64N(3_000_000)
			default:
				gaps[j] = 1 + rng.Uint64N(127)
			}
			span += int64(gaps[j])
		}
		newest := int64(4_000_000_000_000) + int64(i)*1000
		keys = append(keys, fmt.Sprintf("lg:%d", i))
		states = append(states, plainLog(newest-span, c, gaps))
	}
	return keys, states
}

// windowDiffScript is the call sequence, in parts separated by a SIGTERM
// and a restart: CL.WINDOW with limits 1 to 2^63−1 (and near the units
// held), quantities 0, 1, the limit, above it, 2^63−1, windows of 1 ms to
// 2^63−1 ms; COPY and RENAME of LOG keys, SWAPDB there and back, MULTI/EXEC
// and EVAL around CL.WINDOW. A call that may write uses a window of at
// least 10 minutes: the key's TTL is its reset_after_ms from the real now,
// so a shorter one could expire while the test runs (a peek writes
// nothing, so its window may be any).
func windowDiffScript(rng *rand.Rand, keys []string) [][][]any {
	limits := []int64{1, 2, 3, 10, 100, 1000, 1_000_000, math.MaxInt64}
	anyW := []int64{1, 7, 100, 1000, 60_000, 600_000, 3_600_000, 1 << 40, math.MaxInt64 - 1, math.MaxInt64}
	writeW := []int64{600_000, 3_600_000, 86_400_000, 1 << 40, math.MaxInt64}
	live := append([]string(nil), keys...)
	call := func() []any {
		k := live[rng.IntN(len(live))]
		limit := limits[rng.IntN(len(limits))]
		if rng.IntN(3) == 0 {
			limit = 1 + rng.Int64N(20_000)
		}
		var q int64
		switch rng.IntN(8) {
		case 0:
			q = 0
		case 1:
			q = limit
		case 2:
			q = satAddTest(limit, 1)
		case 3:
			q = math.MaxInt64
		case 4:
			q = rng.Int64N(min(limit, 1<<40) + 1)
		default:
			q = 1 + rng.Int64N(3)
		}
		w := writeW[rng.IntN(len(writeW))]
		if q == 0 {
			w = anyW[rng.IntN(len(anyW))]
		}
		args := []any{"CL.WINDOW", k, limit, w, q}
		if rng.IntN(2) == 0 {
			args = append(args, "LOG")
		}
		return args
	}
	var parts [][][]any
	for range 3 {
		var part [][]any
		for i := range 700 {
			switch {
			case i%97 == 5:
				src := live[rng.IntN(len(live))]
				dst := fmt.Sprintf("%s:c%d", src, i)
				part = append(part, []any{"COPY", src, dst})
				live = append(live, dst)
			case i%131 == 7:
				j := rng.IntN(len(live))
				dst := fmt.Sprintf("%s:r%d", live[j], i)
				part = append(part, []any{"RENAME", live[j], dst})
				live[j] = dst
			case i%173 == 11:
				part = append(part, []any{"SWAPDB", 0, 1}, []any{"SWAPDB", 1, 0})
			case i%59 == 3:
				part = append(part, []any{"MULTI"}, call(), call(), call(), []any{"EXEC"})
			case i%61 == 9:
				c := call()
				part = append(part, append([]any{"EVAL", "return redis.call('CL.WINDOW', KEYS[1], unpack(ARGV))", 1, c[1]}, c[2:]...))
			default:
				part = append(part, call())
			}
		}
		for _, k := range live { // every key's units, as a peek sees them
			part = append(part, []any{"CL.WINDOW", k, math.MaxInt64, math.MaxInt64, 0})
		}
		parts = append(parts, part)
	}
	return parts
}

func satAddTest(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// runWindowScript runs the parts on bin over dir, SIGTERM and a restart
// between parts, and returns one line per command: its arguments and its
// reply (or error), as go-redis gives them.
func runWindowScript(t *testing.T, bin, dir string, parts [][][]any) []string {
	t.Helper()
	var out []string
	for _, part := range parts {
		c := launchBin(t, bin, dir)
		rdb := c.client()
		ctx := context.Background()
		pipe := rdb.Pipeline()
		cmds := make([]*redis.Cmd, len(part))
		for i, args := range part {
			cmds[i] = pipe.Do(ctx, args...)
		}
		pipe.Exec(ctx) // errors are per command, below
		for i, cmd := range cmds {
			v, err := cmd.Result()
			line := fmt.Sprint(part[i], " -> ")
			if err != nil {
				line += "error " + err.Error()
			} else {
				line += fmt.Sprint(v)
			}
			out = append(out, line)
		}
		rdb.Close()
		c.termOK()
	}
	return out
}

// launchBin is mustLaunch of a given celld binary.
func launchBin(t *testing.T, bin, dir string) *child {
	t.Helper()
	return launchBinAt(t, bin, dir, freeAddr(t))
}

// TestWindowLogRepliesAsMain: the header format answers as main's plain
// LOG format did, bit for bit, over a socket: ~2,100 calls on 48 LOG keys
// restored from main's plain states (1 to 1,100 entries, counts up to
// 2^49, gaps up to 3,000 s), with COPY, RENAME, SWAPDB, MULTI/EXEC, EVAL
// and two restarts (the new build then restores its own header-format
// states), against the replies main at f3c96f0 gave to the same calls on
// the same directory (windowGoldenFile). Every call is decided as of a
// unit in 2096 (windowDiffStates), so the replies are time-independent.
func TestWindowLogRepliesAsMain(t *testing.T) {
	rng := rand.New(rand.NewPCG(18, 2026))
	keys, states := windowDiffStates(rng)
	parts := windowDiffScript(rng, keys)
	dir := filepath.Join(t.TempDir(), "data")
	writeWindowDir(t, dir, keys, states)
	if bin := os.Getenv("CELLD_WINDOW_GOLDEN_BIN"); bin != "" {
		got := runWindowScript(t, bin, dir, parts)
		if err := os.WriteFile(windowGoldenFile, []byte(strings.Join(got, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %d replies of %s to %s", len(got), bin, windowGoldenFile)
		return
	}
	b, err := os.ReadFile(windowGoldenFile)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	got := runWindowScript(t, celldBinary(t), dir, parts)
	if len(got) != len(want) {
		t.Fatalf("%d replies, the golden file holds %d", len(got), len(want))
	}
	bad := 0
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("command %d:\n got %s\nmain %s", i, got[i], want[i])
			if bad++; bad == 10 {
				t.FailNow()
			}
		}
	}
}
