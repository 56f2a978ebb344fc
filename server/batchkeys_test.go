package server

import (
	"fmt"
	"strings"
	"testing"
)

// TestConnBatchOfManyKeyedCommands: a batch whose commands name more keys
// than the batch prefetches (maxPrefetchKeys) runs whole. Before the fix,
// parseBatch capped only the further keys of multi-key commands, so 32
// pipelined DELs of 10 keys each collected 147 keys for a 128-hash scratch
// and the prefetch panicked (the connection was closed without a reply).
// The second part runs CL.MTHROTTLE calls of 9 groups, whose keys pass the
// cap after 14 calls.
func TestConnBatchOfManyKeyedCommands(t *testing.T) {
	_, addr := startServer(t, nil)
	r := dial(t, addr)
	var in []byte
	var want []string
	for i := range maxBatchCmds {
		args := []string{"DEL"}
		for j := range 10 {
			args = append(args, fmt.Sprintf("del:%d:%d", i, j))
		}
		in = append(in, encode(args...)...)
		want = append(want, ":0")
	}
	for i := range maxBatchCmds + 3 {
		args := []string{"CL.MTHROTTLE"}
		for j := range 9 {
			args = append(args, fmt.Sprintf("m:%d", (i+j)%40), "1000", "1", "60", "1")
		}
		in = append(in, encode(args...)...)
		want = append(want, "")
	}
	if _, err := r.c.Write(in); err != nil {
		t.Fatal(err)
	}
	for i, w := range want {
		got := r.mustReply()
		if w == "" { // CL.MTHROTTLE: ten arrays, allowed
			if !strings.HasPrefix(got, "[[:0 :1001 ") || strings.Count(got, "[:0 ") != 10 {
				t.Fatalf("reply %d = %q, want ten allowed arrays", i, got)
			}
			continue
		}
		if got != w {
			t.Fatalf("reply %d = %q, want %q", i, got, w)
		}
	}
}
