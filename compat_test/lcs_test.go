package compat_test

import (
	"math/rand/v2"
	"testing"
)

// LCS answers byte for byte what redis-server 7.0.15 answers, in RESP2 and
// RESP3: the subsequence, LEN, IDX with and without WITHMATCHLEN and
// MINMATCHLEN, missing keys, a CL.THROTTLE-style integer value, its
// errors (a key of another kind, LEN with IDX, a bad MINMATCHLEN, a bare
// option), and random strings whose ties Redis breaks its own way.
func TestLCSDiff(t *testing.T) {
	steps := []dstep{
		d("SET a ohmytext"), d("SET b mynewtext"), d("LCS a b"), d("LCS a b LEN"), d("LCS a b IDX"),
		d("LCS a b IDX WITHMATCHLEN"), d("LCS a b IDX MINMATCHLEN 2 WITHMATCHLEN"), d("LCS a b idx minmatchlen -5"),
		d("LCS a b LEN IDX"), d("LCS a b MINMATCHLEN x"), d("LCS a b MINMATCHLEN"), d("LCS a b FOO"),
		d("LCS a b WITHMATCHLEN"), d("LCS a b MINMATCHLEN 3"), d("LCS a nokey"), d("LCS nokey nokey2 IDX"),
		d("LCS nokey a LEN"), d("SET n 123456"), d("SET m 2345"), d("LCS n m IDX WITHMATCHLEN"),
		d("HSET h f v"), d("LCS a h"), d("LCS h a LEN"), d("LCS a"), d("SET e ''"), d("LCS a a IDX WITHMATCHLEN"),
	}
	r := rand.New(rand.NewPCG(24, 23))
	for range 40 {
		s := func() string {
			b := make([]byte, r.IntN(40))
			for i := range b {
				b[i] = "ACGT"[r.IntN(4)]
			}
			return string(b)
		}
		steps = append(steps, dstep{cmd: []string{"MSET", "x", s(), "y", s()}}, d("LCS x y"), d("LCS x y IDX WITHMATCHLEN"),
			d("LCS y x IDX MINMATCHLEN 2"), d("LCS x y LEN"))
	}
	all := append([]dstep{}, steps...)
	all = append(all, d("FLUSHALL"), dstep{cmd: []string{"HELLO", "3"}, norm: func(string) string { return "" }})
	all = append(all, steps...)
	diffRun(t, all)
}
