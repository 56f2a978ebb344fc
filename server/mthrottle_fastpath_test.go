package server

import (
	"fmt"
	"testing"
)

// mthrottle3Cmd is bench/family.sh's CL.MTHROTTLE with three groups (16
// arguments) on key number k, as redis-benchmark sends it.
func mthrottle3Cmd(k int) []byte {
	b := []byte("*16\r\n$12\r\nCL.MTHROTTLE\r\n")
	for _, p := range []string{"a", "b", "c"} {
		for _, a := range []string{fmt.Sprintf("%s:%012d", p, k), "1000000", "1", "60", "1"} {
			b = fmt.Appendf(b, "$%d\r\n%s\r\n", len(a), a)
		}
	}
	return b
}

// TestMThrottle16ArgsFastPath: a 16-argument CL.MTHROTTLE takes the
// one-pass parse (readMultibulk answers, no fallback to redcon), and a
// pipeline of 16 of them (256 arguments, twice connState.flat's initial
// capacity) is parsed with every argument in place in flat and every
// group's key queued for prefetch, allocating nothing once flat has grown
// (the first pipeline grows it; pump keeps up to maxKeepArgs). Fails if
// readMultibulk refuses 16 arguments or two-digit counts, or if a batch
// of multi-argument commands copies or allocates per command.
func TestMThrottle16ArgsFastPath(t *testing.T) {
	cmd := mthrottle3Cmd(42)
	args, rest, ok := readMultibulk(cmd, make([][]byte, 0, 16))
	if !ok || len(args) != 16 || len(rest) != 0 || string(args[1]) != "a:000000000042" || string(args[15]) != "1" {
		t.Fatalf("readMultibulk(16 args) = %d args, rest %q, ok %v", len(args), rest, ok)
	}
	var pipe []byte
	for k := range 16 {
		pipe = append(pipe, mthrottle3Cmd(k)...)
	}
	st := &connState{buf: pipe, flat: make([][]byte, 0, 4*maxBatchCmds)}
	parse := func() {
		st.start, st.end = 0, len(pipe)
		if err := st.parseBatch(); err != nil {
			t.Fatal(err)
		}
	}
	parse() // grows flat once
	if cap(st.flat) > maxKeepArgs {
		t.Fatalf("flat grew to %d > maxKeepArgs %d: pump would drop it every pipeline", cap(st.flat), maxKeepArgs)
	}
	if allocs := testing.AllocsPerRun(100, parse); allocs != 0 {
		t.Fatalf("parseBatch of 16 CL.MTHROTTLE: %v allocations per pipeline, want 0", allocs)
	}
	if len(st.cmds) != 16 || len(st.flat) != 256 || len(st.keys) != 48 {
		t.Fatalf("parsed %d commands, %d args, %d keys; want 16, 256, 48", len(st.cmds), len(st.flat), len(st.keys))
	}
	for i, pc := range st.cmds {
		if pc.cmd == nil || pc.cmd.name != "cl.mthrottle" || pc.n != 16 || pc.off != 16*i {
			t.Fatalf("command %d: %+v", i, pc)
		}
		// In place: the argument aliases the read buffer, not a copy.
		a := st.flat[pc.off+6]
		if want := fmt.Sprintf("b:%012d", i); string(a) != want || &a[0] != &pipe[indexOf(pipe, want)] {
			t.Fatalf("command %d: group 2's key %q does not alias the buffer", i, a)
		}
	}
}

func indexOf(b []byte, s string) int {
	for i := 0; i+len(s) <= len(b); i++ {
		if string(b[i:i+len(s)]) == s {
			return i
		}
	}
	return -1
}
