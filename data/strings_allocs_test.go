package data

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// TestStringsAllocsPerCall pins what the counter and string rows of
// bench/strings.sh allocate per call through a real socket (16 pipelined
// calls on existing keys): INCR and GET nothing, SET one object, the
// stored value itself (texts are Go strings in shard.rawv). An allocation
// more per call would show in GC work across the whole keyspace. The
// bounds leave room for the server's background goroutines (a fraction
// of an allocation per call at most).
func TestStringsAllocsPerCall(t *testing.T) {
	r := startRaw(t)
	val := strings.Repeat("v", 100)
	for _, row := range []struct {
		name string
		cmd  func(i int) []string
		max  float64 // allocations per call
	}{
		{"INCR", func(i int) []string { return []string{"INCR", fmt.Sprintf("ctr:%012d", i)} }, 0.1},
		{"SET", func(i int) []string { return []string{"SET", fmt.Sprintf("key:%012d", i), val} }, 1.1},
		{"GET", func(i int) []string { return []string{"GET", fmt.Sprintf("key:%012d", i)} }, 0.1},
	} {
		var bb bytes.Buffer
		for i := range 16 {
			bb.Write(resp(row.cmd(i)...))
		}
		req := bb.Bytes()
		send := func() {
			if _, err := r.conn.Write(req); err != nil {
				t.Fatal(err)
			}
			got := 0
			for bytes.Count(r.buf[:got], []byte("\r\n")) < 16*map[bool]int{true: 2, false: 1}[row.name == "GET"] {
				m, err := r.conn.Read(r.buf[got:])
				if err != nil {
					t.Fatal(err)
				}
				got += m
			}
		}
		send()
		if n := testing.AllocsPerRun(500, send) / 16; n > row.max {
			t.Errorf("%s: %.2f allocations per call, want <= %.1f", row.name, n, row.max)
		}
	}
}
