package store

import (
	"fmt"
	"testing"
)

// benchTexts fills a store with n keys holding 100-byte texts (SET's bench
// shape) and returns it, its keys and a fresh value per key's rewrite.
func benchTexts(b *testing.B, n int, track bool) (*Store, [][]byte, []Value) {
	s := New(Options{TrackDirty: track})
	keys := make([][]byte, n)
	vals := make([]Value, 64)
	for i := range vals {
		vals[i] = StringValue(fmt.Appendf(nil, "%0100d", i))
	}
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "key:%06d", i)
		s.Put(keys[i], vals[i%len(vals)], t0ms, PutAlways, false)
	}
	return s, keys, vals
}

// BenchmarkPutTextExisting is SET of a 100-byte value over a key that holds
// one, over 100k keys visited in a scattered order (cold cache lines, as
// under redis-benchmark -r 100000): the verbatim-text path of Put. It
// reports the process's CPU per op (cpu-ns/op) beside wall time, which on
// a shared machine counts the neighbours too.
func BenchmarkPutTextExisting(b *testing.B) {
	s, keys, vals := benchTexts(b, 100_000, false)
	i := 0
	cpu0 := processCPUNs()
	for b.Loop() {
		i = (i + 7919) % len(keys)
		s.Put(keys[i], vals[i%len(vals)], t0ms, PutAlways, false)
	}
	b.ReportMetric(float64(processCPUNs()-cpu0)/float64(b.N), "cpu-ns/op")
}

// BenchmarkGetTextExisting is GET of those keys.
func BenchmarkGetTextExisting(b *testing.B) {
	s, keys, _ := benchTexts(b, 100_000, false)
	i := 0
	cpu0 := processCPUNs()
	for b.Loop() {
		i = (i + 7919) % len(keys)
		s.Get(keys[i], t0ms)
	}
	b.ReportMetric(float64(processCPUNs()-cpu0)/float64(b.N), "cpu-ns/op")
}
