package server

import "testing"

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
	c.out = make([]byte, 0, 256)
	if n := testing.AllocsPerRun(100, func() {
		c.out = c.out[:0]
		x.IntArray(0, 100, 99, -1, 1000)
	}); n != 0 {
		t.Errorf("IntArray: %v allocations per call, want 0", n)
	}
}
