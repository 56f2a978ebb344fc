package data

import (
	"errors"
	"strconv"

	"github.com/celld/celld/kinds"
	"github.com/celld/celld/server"
	"github.com/celld/celld/store"
)

// Shared pieces of the hash, list and sorted-set handlers (hash.go,
// list.go, zset.go): Redis's error texts, its strict integer parser, and
// the mapping of store errors to replies.

const (
	errNotFloat   = "ERR value is not a valid float"
	errSyntaxText = "ERR syntax error"
	errPositive   = "ERR value is out of range, must be positive"
	errOOMText    = "OOM command not allowed when used memory > 'maxmemory'."
	// errTooBig refuses a write that would take a key past
	// kinds.MaxElements elements or an element past kinds.MaxElementBytes.
	errTooBig = "ERR value too large: celld keeps at most 1048576 elements of at most 64 MiB per key"
)

// replyStoreErr answers err from a store call: WRONGTYPE, OOM, or the
// error's text.
func replyStoreErr(x *server.Ctx, err error) {
	switch {
	case errors.Is(err, store.ErrWrongType):
		x.WrongType()
	case errors.Is(err, store.ErrOOM):
		x.Error(errOOMText)
	default:
		x.Error("ERR " + err.Error())
	}
}

// arityErr is Redis's reply to a wrong argument count found by a handler.
func arityErr(x *server.Ctx) {
	x.Error("ERR wrong number of arguments for '" + lowerString(x.Args()[0]) + "' command")
}

// lowerString is b lower-cased, as a string (strings.go's lower gives bytes).
func lowerString(b []byte) string {
	out := make([]byte, len(b))
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		out[i] = c
	}
	return string(out)
}

// is reports whether arg equals the lower-case word w, ignoring case.
func is(arg []byte, w string) bool {
	if len(arg) != len(w) {
		return false
	}
	for i := range arg {
		c := arg[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != w[i] {
			return false
		}
	}
	return true
}

// parseInt parses b as Redis's string2ll does: optional '-', no '+', no
// leading zeros, no spaces, within int64.
func parseInt(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	if len(b) == 1 && b[0] == '0' {
		return 0, true
	}
	neg := b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 || b[0] < '1' || b[0] > '9' {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' || n > (1<<64-1)/10 {
			return 0, false
		}
		n *= 10
		if n > 1<<64-1-uint64(c-'0') {
			return 0, false
		}
		n += uint64(c - '0')
	}
	if neg {
		if n > 1<<63 {
			return 0, false
		}
		return -int64(n), true
	}
	if n > 1<<63-1 {
		return 0, false
	}
	return int64(n), true
}

// rangeIndexes turns Redis's start/stop (negative from the end) into a
// clamped inclusive range of [0, n); ok is false when it is empty.
func rangeIndexes(start, stop int64, n int) (int, int, bool) {
	ln := int64(n)
	if start < 0 {
		start += ln
	}
	if stop < 0 {
		stop += ln
	}
	if start < 0 {
		start = 0
	}
	if start > stop || start >= ln {
		return 0, 0, false
	}
	if stop >= ln {
		stop = ln - 1
	}
	return int(start), int(stop), true
}

// tooBig reports whether adding add elements to a value of n elements, or
// storing an element of size bytes, passes the per-key caps.
func tooBig(n, add int) bool { return n+add > kinds.MaxElements }

// elemTooBig reports whether one argument is too long to store.
func elemTooBig(b []byte) bool { return len(b) > kinds.MaxElementBytes }

// scanArgs parses HSCAN/ZSCAN's cursor and options (args from the cursor
// on). It replies the error itself and returns ok false on bad input.
func scanArgs(x *server.Ctx, args [][]byte) (pattern string, hasPattern bool, ok bool) {
	if _, err := strconv.ParseUint(string(args[0]), 10, 64); err != nil {
		x.Error("ERR invalid cursor")
		return "", false, false
	}
	for i := 1; i < len(args); i += 2 {
		if i+1 >= len(args) {
			x.Error(errSyntaxText)
			return "", false, false
		}
		switch {
		case is(args[i], "count"):
			n, ok := parseInt(args[i+1])
			if !ok {
				x.Error(errNotInt)
				return "", false, false
			}
			if n < 1 {
				x.Error(errSyntaxText)
				return "", false, false
			}
		case is(args[i], "match"):
			pattern, hasPattern = string(args[i+1]), true
		default:
			x.Error(errSyntaxText)
			return "", false, false
		}
	}
	if pattern == "*" {
		hasPattern = false
	}
	return pattern, hasPattern, true
}

func newHash() store.Object { return kinds.NewHash() }
func newList() store.Object { return kinds.NewList() }
func newZSet() store.Object { return kinds.NewZSet() }
