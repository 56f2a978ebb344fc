package server

import "slices"

// IntArray replies an array of integers (CL.WINDOW's five-integer reply,
// CL.THROTTLE's shape) in one pass over the output buffer. Up to five
// integers (CL.WINDOW's reply) take appendResult5's path: one capacity
// check for the whole array and each integer formatted in place, not
// through strconv: -1..9999 by putReplySmall, others by putReplyInt; more go
// through appendInt. Same bytes either way (TestCtxIntArray). It
// allocates nothing beyond the output buffer's growth (the variadic slice
// stays on the caller's stack). Like every Ctx reply method it runs on
// the connection's goroutine only.
func (x *Ctx) IntArray(vals ...int64) {
	b := x.c.out
	if len(vals) <= 5 {
		n := len(b)
		if cap(b)-n < maxResultLen {
			b = slices.Grow(b, maxResultLen)
		}
		d := (*[maxResultLen]byte)(b[n : n+maxResultLen])
		d[0], d[1], d[2], d[3] = '*', byte('0'+len(vals)), '\r', '\n'
		i := 4
		for _, v := range vals {
			if uint64(v+1) > 10000 { // outside -1..9999 (v+1 wraps for MaxInt64)
				i = putReplyInt(d, i, v)
			} else {
				i = putReplySmall(d, i, v)
			}
		}
		x.c.out = b[:n+i]
		return
	}
	b = appendArray(b, len(vals))
	for _, v := range vals {
		b = appendInt(b, v)
	}
	x.c.out = b
}
