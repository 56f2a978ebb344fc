package data

import (
	"strconv"

	"github.com/celld/celld/kinds"
	"github.com/celld/celld/server"
	"github.com/celld/celld/store"
)

// SETBIT and GETBIT: a string seen as a bit array, bit 0 the most
// significant bit of byte 0 (Redis's order).

func init() {
	server.Register(
		server.Command{Name: "setbit", Arity: 4, Flags: "write denyoom", FirstKey: 1, LastKey: 1, Step: 1,
			ACL: "write bitmap slow", Group: "bitmap", Since: "2.2.0", IntIsValue: true,
			Summary: "Sets or clears the bit at offset of the string value. Creates the key if it doesn't exist.", Run: cmdSetBit},
		server.Command{Name: "getbit", Arity: 3, Flags: "readonly fast", FirstKey: 1, LastKey: 1, Step: 1,
			ACL: "read bitmap fast", Group: "bitmap", Since: "2.2.0",
			Summary: "Returns a bit value by offset.", Run: cmdGetBit},
	)
}

const (
	errBitOffset = "ERR bit offset is not an integer or out of range"
	errBitValue  = "ERR bit is not an integer or out of range"
)

// bitOffset reads a bit offset as Redis's getBitOffsetFromArgument: a
// string2ll integer, not negative, whose byte lies within
// proto-max-bulk-len.
func bitOffset(x *server.Ctx, arg []byte) (int64, bool) {
	off, ok := kinds.ParseInt(arg)
	if !ok || off < 0 || off>>3 >= x.MaxBulk() {
		x.Error(errBitOffset)
		return 0, false
	}
	return off, true
}

func cmdSetBit(x *server.Ctx) {
	a := x.Args()
	off, ok := bitOffset(x, a[2])
	if !ok {
		return
	}
	on, ok := kinds.ParseInt(a[3])
	if !ok || on&^1 != 0 {
		x.Error(errBitValue)
		return
	}
	byteIdx, mask := int(off>>3), byte(1)<<(7-uint(off&7))
	var old int64
	// In place on a long text (store.EditString: O(1) amortized), else
	// the general path below.
	if _, done := x.Store().EditString(a[1], x.NowMs(), int64(byteIdx), 1, x.MaxBulk(), func(r []byte) {
		if r[0]&mask != 0 {
			old = 1
		}
		if on == 1 {
			r[0] |= mask
		} else {
			r[0] &^= mask
		}
	}); done {
		x.Int(old)
		return
	}
	var wrong bool
	err := x.Store().Update(a[1], x.NowMs(), func(o store.Value, exists bool) (store.Value, store.Action) {
		var cur []byte
		if exists {
			if o.Kind != store.KindString {
				wrong = true
				return o, store.Keep
			}
			cur = text(o)
		}
		buf := cur
		if len(buf) <= byteIdx {
			buf = make([]byte, byteIdx+1)
			copy(buf, cur)
		}
		if buf[byteIdx]&mask != 0 {
			old = 1
		}
		if on == 1 {
			buf[byteIdx] |= mask
		} else {
			buf[byteIdx] &^= mask
		}
		nv := store.StringValueOf(unsafeString(buf)) // buf is ours: text() copies
		nv.ExpireAtMs = o.ExpireAtMs
		return nv, store.Put
	})
	switch {
	case wrong:
		x.WrongType()
	case err != nil:
		x.StoreError(err)
	default:
		x.Int(old)
	}
}

func cmdGetBit(x *server.Ctx) {
	a := x.Args()
	off, ok := bitOffset(x, a[2])
	if !ok {
		return
	}
	// Peeked: one byte read under the lock, no copy of the value, and a
	// grown string is not handed out.
	var bit int64
	kind, found := x.Store().PeekString(a[1], x.NowMs(), func(v store.Value) {
		i := int(off >> 3)
		var c byte
		if v.Raw != "" || v.Invalid {
			if i >= len(v.Raw) {
				return
			}
			c = v.Raw[i]
		} else {
			var buf [20]byte
			t := strconv.AppendUint(buf[:0], v.TAT, 10)
			if i >= len(t) {
				return
			}
			c = t[i]
		}
		if c&(byte(1)<<(7-uint(off&7))) != 0 {
			bit = 1
		}
	})
	switch {
	case !found:
		x.Int(0)
	case kind != store.KindString:
		x.WrongType()
	default:
		x.Int(bit)
	}
}
