package repl

import (
	"fmt"
	"io"
	"log/slog"
	"math/rand"
	"testing"
	"time"

	"github.com/celld/celld/store"
)

// BenchmarkFollowerApply is a follower's apply of a live batch: 256 plain
// TAT effects (bench/repl.sh's CL.THROTTLE keys, "ok:N") on random keys of
// 100,000 it holds, decoded from the wire and applied. ns/op is per batch;
// ns/effect per effect.
func BenchmarkFollowerApply(b *testing.B) {
	d, err := store.Group(store.New(store.Options{}), 1)
	if err != nil {
		b.Fatal(err)
	}
	n := New(d, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	f := newFollower(n, 1, "")
	const keys, per = 100000, 256
	now := time.Now().UnixMilli()
	tat := uint64(time.Now().UnixNano())
	var all []byte
	for i := 0; i < keys; i++ {
		all = appendEntry(all[:0], 0, store.Change{Key: []byte(fmt.Sprintf("ok:%d", i)), TAT: tat, IsTAT: true, ExpireAtMs: now + 60000})
		if err := f.apply(all, false, nil); err != nil {
			b.Fatal(err)
		}
	}
	rng := rand.New(rand.NewSource(1))
	batches := make([][]byte, 64)
	for j := range batches {
		var p []byte
		for i := 0; i < per; i++ {
			p = appendEntry(p, 0, store.Change{Key: []byte(fmt.Sprintf("ok:%d", rng.Intn(keys))), TAT: tat + uint64(i), IsTAT: true, ExpireAtMs: now + 60000})
		}
		batches[j] = p
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := f.apply(batches[i%len(batches)], false, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/per, "ns/effect")
}
