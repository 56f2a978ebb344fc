package persist

import (
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"
)

// TestMain removes the on-disk fixture the Restore benchmark builds.
func TestMain(m *testing.M) {
	code := m.Run()
	if restoreFixture.dir != "" {
		os.RemoveAll(restoreFixture.dir)
	}
	os.Exit(code)
}

// fill writes n records key%09d → a 19-digit TAT, half of them with an
// expiry in the far future, in synced batches of 10,000.
func fill(tb testing.TB, db *DB, n int) {
	tb.Helper()
	ops := make([]Op, 0, 10_000)
	for i := 0; i < n; i++ {
		var exp int64
		if i%2 == 0 {
			exp = 4_000_000_000_000 // year 2096
		}
		ops = append(ops, Op{
			Key:        []byte(fmt.Sprintf("user:%09d", i)),
			Value:      strconv.AppendInt(nil, 1_700_000_000_000_000_000+int64(i), 10),
			ExpireAtMs: exp,
		})
		if len(ops) == cap(ops) || i == n-1 {
			if err := db.Write(ops); err != nil {
				tb.Fatal(err)
			}
			ops = ops[:0]
		}
	}
}

// TestRestoreManyKeys restores 200,000 keys from a real directory (the
// benchmark does 1,000,000) and logs how long it took. No time assertion.
func TestRestoreManyKeys(t *testing.T) {
	const n = 200_000
	dir := t.TempDir()
	db := mustOpen(t, dir, Options{})
	start := time.Now()
	fill(t, db, n)
	t.Logf("wrote %d keys in %v", n, time.Since(start))
	mustClose(t, db)

	db = mustOpen(t, dir, Options{})
	defer mustClose(t, db)
	var (
		count int
		prev  []byte
	)
	st, err := db.Restore(1_700_000_000_000, func(k, v []byte, exp int64) error {
		if prev != nil && string(prev) >= string(k) {
			return fmt.Errorf("keys out of order: %q then %q", prev, k)
		}
		prev = append(prev[:0], k...)
		count++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if count != n || st.Loaded != n || st.Expired != 0 {
		t.Fatalf("restored %d (stats %+v), want %d", count, st, n)
	}
	t.Logf("restored %d keys in %v", n, st.Duration)
}

// BenchmarkWrite10k commits 10,000 ops as one synced batch on the real disk.
func BenchmarkWrite10k(b *testing.B) {
	db := mustOpen(b, b.TempDir(), Options{})
	defer mustClose(b, db)
	ops := make([]Op, 10_000)
	for i := range ops {
		ops[i] = Op{
			Key:        []byte(fmt.Sprintf("user:%09d", i)),
			Value:      []byte("1700000000000000000"),
			ExpireAtMs: 1_700_000_060_000,
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := db.Write(ops); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(ops)), "ns/key")
}

// BenchmarkWrite1 is the cost floor of a window: one synced batch of one op.
func BenchmarkWrite1(b *testing.B) {
	db := mustOpen(b, b.TempDir(), Options{})
	defer mustClose(b, db)
	ops := []Op{{Key: []byte("user:1"), Value: []byte("1700000000000000000")}}
	b.ReportAllocs()
	for b.Loop() {
		if err := db.Write(ops); err != nil {
			b.Fatal(err)
		}
	}
}

var restoreFixture struct {
	once sync.Once
	dir  string
	err  error
}

const restoreN = 1_000_000

// BenchmarkRestore1M restores 1,000,000 records from a real directory. The
// directory is built once per test binary run, only when this benchmark
// runs, and removed by TestMain.
func BenchmarkRestore1M(b *testing.B) {
	restoreFixture.once.Do(func() {
		dir, err := os.MkdirTemp("", "persist-restore-bench-")
		if err != nil {
			restoreFixture.err = err
			return
		}
		restoreFixture.dir = dir
		db, err := Open(dir, Options{Logger: quietLogger()})
		if err != nil {
			restoreFixture.err = err
			return
		}
		start := time.Now()
		fill(b, db, restoreN)
		restoreFixture.err = db.Close()
		b.Logf("built %d-record fixture in %v", restoreN, time.Since(start))
	})
	if restoreFixture.err != nil {
		b.Fatal(restoreFixture.err)
	}
	db := mustOpen(b, restoreFixture.dir, Options{})
	defer mustClose(b, db)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		var n int
		st, err := db.Restore(1_700_000_000_000, func(k, v []byte, exp int64) error {
			n++
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		if n != restoreN || st.Loaded != restoreN {
			b.Fatalf("restored %d, want %d", n, restoreN)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/restoreN, "ns/key")
}

// BenchmarkEncodeSealTATs is a window of 60,000 CL.THROTTLE keys (about
// 1.6 MB of records, the allowed row's window) encoded and sealed: the
// flusher's CPU per key before the write, checksum included. ns/op is
// per key; B/key is the records' bytes per key. The expiry is what
// CL.THROTTLE writes: the new TAT's millisecond (now + trunc((TAT − now) /
// 1 ms)), give or take one.
func BenchmarkEncodeSealTATs(b *testing.B) {
	const n = 60_000
	keys := make([][]byte, n)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "ok:%012d", i)
	}
	var e Encoder
	e.Reset()
	bytes := 0
	for i := 0; b.Loop(); i++ {
		tat := 1_800_000_000_000_000_000 + uint64(i)*1_000_003
		e.TAT(keys[i%n], tat, int64(tat/1e6)-int64(i%2))
		if i%n == n-1 {
			bytes = e.Bytes()
			e.seal(uint64(i), 1_800_000_000_000)
			e.Reset()
		}
	}
	if bytes > 0 {
		b.ReportMetric(float64(bytes)/n, "B/key")
	}
}
