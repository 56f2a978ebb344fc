package server

// IntArray replies an array of integers (CL.WINDOW's five-integer reply,
// CL.THROTTLE's shape) in one pass over the output buffer: the header and
// each integer are appended to a local slice, stored back once. It
// allocates nothing beyond the output buffer's growth (the variadic slice
// stays on the caller's stack). Like every Ctx reply method it runs on the
// connection's goroutine only.
func (x *Ctx) IntArray(vals ...int64) {
	b := appendArray(x.c.out, len(vals))
	for _, v := range vals {
		b = appendInt(b, v)
	}
	x.c.out = b
}
