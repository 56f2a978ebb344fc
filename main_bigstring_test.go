package main

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestProcessBigStringEditsDiff: APPEND, SETRANGE and SETBIT on strings of
// 100 KB-1 MB, which celld now writes in place (store.EditString), answer
// as redis-server answers side by side, and so do GETRANGE, GETBIT, STRLEN
// and GET between them (a GET hands the text out, so the next in-place
// write copies it first); the bytes survive a SIGTERM restart and a SAVE +
// kill -9 restart exactly, and a kill -9 without SAVE after a flush window.
func TestProcessBigStringEditsDiff(t *testing.T) {
	sock := startRedisServer(t)
	dir := t.TempDir()
	args := []string{"--proto-max-bulk-len", "4mb"}
	cell := mustLaunch(t, dir, args...)
	ref := dialF(t, "redis", "unix", sock)
	cc := dialF(t, "celld", "tcp", cell.addr)
	ref.do("FLUSHALL")
	rng := rand.New(rand.NewPCG(14, 41))
	keys := []string{"s1", "s2", "s3"}
	both := func(a ...string) {
		t.Helper()
		w, g := ref.do(a...), cc.do(a...)
		if w.String() != g.String() {
			t.Fatalf("%s: redis %.200s, celld %.200s", abbrev(a), w.String(), g.String())
		}
	}
	for _, k := range keys {
		both("SET", k, strings.Repeat("ab", 50_000)) // 100 KB, not a number
	}
	check := func(when string) {
		t.Helper()
		for _, k := range keys {
			w, g := ref.do("GET", k), cc.do("GET", k)
			if w.s != g.s {
				t.Fatalf("%s: GET %s: redis %d bytes, celld %d bytes (first difference at %d)", when, k, len(w.s), len(g.s), firstDiff(w.s, g.s))
			}
		}
	}
	for round := 0; round < 4; round++ {
		for i := 0; i < 400; i++ {
			k := keys[rng.IntN(len(keys))]
			val := strings.Repeat(string(rune('a'+rng.IntN(26))), 1+rng.IntN(300))
			n := 100_000 + round*50_000
			switch r := rng.IntN(10); {
			case r < 3:
				both("APPEND", k, val)
			case r < 5:
				both("SETRANGE", k, strconv.Itoa(rng.IntN(n+1000)), val)
			case r < 7:
				both("SETBIT", k, strconv.Itoa(rng.IntN(8*(n+1000))), strconv.Itoa(rng.IntN(2)))
			case r < 8:
				lo := rng.IntN(n) - 1000
				both("GETRANGE", k, strconv.Itoa(lo), strconv.Itoa(lo+rng.IntN(2000)))
			case r < 9:
				both("GETBIT", k, strconv.Itoa(rng.IntN(8*(n+1000))))
				both("STRLEN", k)
			default:
				if rng.IntN(4) == 0 {
					check("between writes")
				}
			}
		}
		check("before the restart")
		switch round {
		case 0:
			if code, _ := cell.term(); code != 0 {
				t.Fatalf("SIGTERM: exit %d; log:\n%s", code, cell.logs)
			}
		case 1:
			if v := cc.do("SAVE"); v.isErr() {
				t.Fatalf("SAVE: %s", v)
			}
			cell.kill()
		case 2:
			cell.term()
		default:
			// kill -9 a few flush windows (100 ms) after the last write:
			// the windows' records hold the bytes.
			time.Sleep(time.Second)
			cell.kill()
		}
		cell = mustLaunch(t, dir, args...)
		cc = dialF(t, "celld", "tcp", cell.addr)
		check("after the restart")
		for _, k := range keys {
			both("STRLEN", k)
		}
	}
}

func firstDiff(a, b string) int {
	for i := 0; i < min(len(a), len(b)); i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
