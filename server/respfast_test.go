package server

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/tidwall/redcon"
)

// TestReadMultibulkMatchesRedcon: wherever readMultibulk answers, it
// answers exactly what redcon.ReadNextCommand answers (the arguments, their
// bytes and the rest), over whole commands, every prefix of them, and
// random single-byte mutations (signs, leading zeros, missing CR or LF,
// wrong lengths, "*0"); and it does answer for whole, plain commands,
// which is its point.
func TestReadMultibulkMatchesRedcon(t *testing.T) {
	cmds := [][]string{
		{"CL.THROTTLE", "user:1234", "15", "30", "60"},
		{"CL.MTHROTTLE", "a:1", "1000000", "1", "60", "1", "b:2", "1000000", "1", "60", "1", "c:3", "1000000", "1", "60", "1"},
		{"PING"},
		{"SET", "k", ""},
		{"SET", "k", string(make([]byte, 300))},
		{"GET", "a\r\nb"},
	}
	enc := func(args []string) []byte {
		b := fmt.Appendf(nil, "*%d\r\n", len(args))
		for _, a := range args {
			b = fmt.Appendf(b, "$%d\r\n%s\r\n", len(a), a)
		}
		return b
	}
	rng := rand.New(rand.NewPCG(1, 2))
	answered := 0
	check := func(p []byte) {
		t.Helper()
		args, rest, ok := readMultibulk(p, nil)
		if !ok {
			return
		}
		answered++
		complete, want, _, wrest, err := redcon.ReadNextCommand(p, nil)
		if err != nil || !complete || len(args) != len(want) || string(rest) != string(wrest) || len(rest) != len(wrest) {
			t.Fatalf("%q: readMultibulk %q rest %q; redcon complete %v %q rest %q err %v", p, args, rest, complete, want, wrest, err)
		}
		for i := range args {
			if string(args[i]) != string(want[i]) || cap(args[i]) != cap(want[i]) || len(args[i]) > 0 && &args[i][0] != &want[i][0] {
				t.Fatalf("%q: argument %d %q, redcon %q", p, i, args[i], want[i])
			}
		}
	}
	alphabet := []byte("*$0123456789+-\r\nx ")
	for _, c := range cmds {
		whole := enc(c)
		if args, _, ok := readMultibulk(whole, nil); !ok || len(args) != len(c) {
			t.Fatalf("%q: not answered (%v, %q)", whole, ok, args)
		}
		two := append(slices.Clone(whole), whole...)
		for n := 0; n <= len(two); n++ {
			check(two[:n])
		}
		for range 3000 {
			m := slices.Clone(two)
			for range 1 + rng.IntN(2) {
				m[rng.IntN(len(m))] = alphabet[rng.IntN(len(alphabet))]
			}
			check(m)
			check(m[:rng.IntN(len(m)+1)])
		}
	}
	for _, p := range []string{"*0\r\n", "*-1\r\n", "*+1\r\n$4\r\nPING\r\n", "*1\r\n$+4\r\nPING\r\n", "*01\r\n$04\r\nPING\r\n",
		"*1\r\n$1234567890\r\nx\r\n", "*1\n$4\r\nPING\r\n", "*1\r\n$4\nPING\r\n", "*1\r\n$4\r\nPING\n\r", "*1\r\n$3\r\nPING\r\n"} {
		check([]byte(p))
	}
	if answered < 1000 {
		t.Errorf("answered only %d times", answered)
	}
}

// FuzzReadMultibulk: the same property as above for any input.
func FuzzReadMultibulk(f *testing.F) {
	f.Add([]byte("*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"))
	f.Add([]byte("*01\r\n$04\r\nPING\r\n"))
	f.Fuzz(func(t *testing.T, p []byte) {
		args, rest, ok := readMultibulk(p, nil)
		if !ok {
			return
		}
		complete, want, _, wrest, err := redcon.ReadNextCommand(p, nil)
		if err != nil || !complete || len(args) != len(want) || len(rest) != len(wrest) {
			t.Fatalf("%q: readMultibulk %q rest %q; redcon complete %v %q rest %q err %v", p, args, rest, complete, want, wrest, err)
		}
		for i := range args {
			if string(args[i]) != string(want[i]) || cap(args[i]) != cap(want[i]) {
				t.Fatalf("%q: argument %d %q, redcon %q", p, i, args[i], want[i])
			}
		}
	})
}
