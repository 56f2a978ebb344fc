package main

import (
	"bytes"

	"github.com/celld/celld/persist"
)

// drain is encode's changes as ops, each with its own copies of its
// bytes (EachOp's decoding), appended to buf: for tests that look at what
// a window holds or write it later themselves.
func (p *persistence) drain(nowMs int64, buf []persist.Op) []persist.Op {
	var e persist.Encoder
	p.encode(nowMs, &e)
	e.EachOp(func(op *persist.Op) {
		c := *op
		c.Key = bytes.Clone(op.Key)
		c.Value = bytes.Clone(op.Value) // nil stays nil, empty stays empty
		c.Object = bytes.Clone(op.Object)
		buf = append(buf, c)
	})
	return buf
}
