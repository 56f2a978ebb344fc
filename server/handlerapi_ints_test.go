package server

import (
	"math/rand/v2"
	"testing"
)

// IntArray writes the array header and each integer, exactly as Array
// plus Int per element would, in both protocols (integers and array
// headers are the same in RESP2 and RESP3), and allocates nothing once
// the output buffer has room.
func TestCtxIntArray(t *testing.T) {
	c := &client{}
	x := &Ctx{c: c}
	for _, vals := range [][]int64{
		{},
		{0, 100, 99, -1, 1000},
		{1, -9223372036854775808, 9223372036854775807, 12, -12},
		{-9223372036854775808, -9223372036854775808, -9223372036854775808, -9223372036854775808, -9223372036854775808},
		{9, 10, 99, 100, -10},
		{1e18, 999999999999999999, -1e18, 1e9, -100},
		{7},
		{0, 1, 2, 3, 4, 5},
		{1, -9223372036854775808, 9223372036854775807, 12, -12, 0, 1e18},
		// the inline range -1..9999 and its bounds
		{-2, -1, 0, 9, 10},
		{99, 100, 999, 1000, 9999},
		{10000, -2, 9999, -1, 10001},
		{-9223372036854775808, 9223372036854775807, -1, 9999, 10000},
		{9223372036854775807, 9223372036854775806, -9223372036854775807, 1, 0},
		{101, 1001, 1009, 5050, 9990},
	} {
		c.out = c.out[:0]
		x.IntArray(vals...)
		got := string(c.out)
		c.out = c.out[:0]
		x.Array(len(vals))
		for _, v := range vals {
			x.Int(v)
		}
		if want := string(c.out); got != want {
			t.Errorf("IntArray(%v) = %q, want %q", vals, got, want)
		}
	}
	// Random arrays of up to 7 integers of every magnitude, against Int.
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		vals := make([]int64, r.IntN(8))
		for i := range vals {
			vals[i] = int64(r.Uint64() >> r.IntN(64))
			if r.IntN(2) == 0 {
				vals[i] = -vals[i]
			}
		}
		c.out = append(c.out[:0], "prefix"...) // appends after what is there
		x.IntArray(vals...)
		got := string(c.out)
		c.out = append(c.out[:0], "prefix"...)
		x.Array(len(vals))
		for _, v := range vals {
			x.Int(v)
		}
		if want := string(c.out); got != want {
			t.Fatalf("IntArray(%v) = %q, want %q", vals, got, want)
		}
	}
	c.out = make([]byte, 0, 256)
	if n := testing.AllocsPerRun(100, func() {
		c.out = c.out[:0]
		x.IntArray(0, 100, 99, -1, 1000)
	}); n != 0 {
		t.Errorf("IntArray: %v allocations per call, want 0", n)
	}
}

// BenchmarkCtxIntArray is CL.WINDOW's reply: an allowed call of a limit of
// 100 with its reset in ms, and a denied one with its retry.
func BenchmarkCtxIntArray(b *testing.B) {
	c := &client{out: make([]byte, 0, 4096)}
	x := &Ctx{c: c}
	for _, r := range []struct {
		name string
		vals [5]int64
	}{{"allowed", [5]int64{0, 100, 99, -1, 1000}}, {"denied", [5]int64{1, 100, 0, 734, 734}}, {"big", [5]int64{0, 1000000, 999999, -1, 3600000}}} {
		b.Run(r.name, func(b *testing.B) {
			v := r.vals
			for range b.N {
				c.out = c.out[:0]
				x.IntArray(v[0], v[1], v[2], v[3], v[4])
			}
		})
	}
}
