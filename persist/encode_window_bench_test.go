package persist

import (
	"fmt"
	"testing"

	"github.com/celld/celld/window"
)

// BenchmarkEncodeSealWindowLog is BenchmarkEncodeSealTATs for CL.WINDOW
// LOG keys: a window of 60,000 keys each holding a LOG state of a few
// entries (limit 100 per second, a call every ~80 ms: what
// bench/window.sh's LOG row drains), encoded with Encoder.Window and
// sealed. ns/op is per key.
func BenchmarkEncodeSealWindowLog(b *testing.B) {
	const n = 60_000
	keys := make([][]byte, n)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "wl:%012d", i)
	}
	l := window.Limit{Mode: window.Log, Limit: 100, WindowMs: 1000}
	states := make([][]byte, 64)
	var st []byte
	now := int64(1_800_000_000_000)
	for i := range states {
		now += 80
		_, next, _, err := l.Apply(st, now, 1, nil)
		if err != nil {
			b.Fatal(err)
		}
		st, states[i] = next, next
	}
	var e Encoder
	e.Reset()
	for i := 0; b.Loop(); i++ {
		e.Window(keys[i%n], states[i%len(states)], now+1000)
		if i%n == n-1 {
			e.seal(uint64(i), 1_800_000_000_000)
			e.Reset()
		}
	}
}
