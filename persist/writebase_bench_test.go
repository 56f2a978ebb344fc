package persist

import (
	"fmt"
	"testing"
)

// BenchmarkWriteBase1M times one fold of 1M keys (a TAT and an expiry
// each, 100 "shards" of 10k keys with a Spill after each, as the server's
// snapshot does) into a real directory, fsyncs included: the cost of a
// base rewrite beside the window writes.
func BenchmarkWriteBase1M(b *testing.B) {
	db := mustOpen(b, b.TempDir(), Options{})
	defer mustClose(b, db)
	keys := make([][]byte, 1_000_000)
	for i := range keys {
		keys[i] = []byte(fmt.Sprintf("user:%09d", i))
	}
	b.ResetTimer()
	for range b.N {
		if _, err := db.WriteBase(func(w *BaseWriter) error {
			for i, k := range keys {
				w.AddTAT(k, uint64(1_700_000_000_000_000_000+i), 4_000_000_000_000)
				if i%10_000 == 9_999 {
					if err := w.Spill(); err != nil {
						return err
					}
				}
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}
}
