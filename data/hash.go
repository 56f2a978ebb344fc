package data

import (
	"errors"
	"math"
	"math/rand/v2"
	"strconv"

	"github.com/celld/celld/kinds"
	"github.com/celld/celld/server"
	"github.com/celld/celld/store"
)

// Hash commands (Redis 7's): HSET HSETNX HMSET HGET HMGET HGETALL HDEL
// HEXISTS HLEN HKEYS HVALS HINCRBY HINCRBYFLOAT HSTRLEN HRANDFIELD HSCAN.
// Each runs under its key's shard lock through store.ReadObject /
// WriteObject; replies are written from inside the callback (the reply
// buffer is the caller's, nothing calls back into the store).

func init() {
	const g, s = "hash", "2.0.0"
	register(
		server.Command{Name: "hset", Arity: -4, Flags: "write denyoom fast", FirstKey: 1, LastKey: 1, Step: 1, ACL: "write hash fast", Group: g, Since: s, Summary: "Creates or modifies the value of a field in a hash.", Run: hsetCmd},
		server.Command{Name: "hmset", Arity: -4, Flags: "write denyoom fast", FirstKey: 1, LastKey: 1, Step: 1, ACL: "write hash fast", Group: g, Since: s, Summary: "Sets the values of multiple fields.", Run: hsetCmd},
		server.Command{Name: "hsetnx", Arity: 4, Flags: "write denyoom fast", FirstKey: 1, LastKey: 1, Step: 1, ACL: "write hash fast", Group: g, Since: s, Summary: "Sets the value of a field in a hash only when the field doesn't exist.", Run: hsetnxCmd},
		server.Command{Name: "hget", Arity: 3, Flags: "readonly fast", FirstKey: 1, LastKey: 1, Step: 1, ACL: "read hash fast", Group: g, Since: s, Summary: "Returns the value of a field in a hash.", Run: hgetCmd},
		server.Command{Name: "hmget", Arity: -3, Flags: "readonly fast", FirstKey: 1, LastKey: 1, Step: 1, ACL: "read hash fast", Group: g, Since: s, Summary: "Returns the values of all fields in a hash.", Run: hmgetCmd},
		server.Command{Name: "hgetall", Arity: 2, Flags: "readonly", FirstKey: 1, LastKey: 1, Step: 1, ACL: "read hash slow", Group: g, Since: s, Summary: "Returns all fields and values in a hash.", Run: hgetallCmd},
		server.Command{Name: "hkeys", Arity: 2, Flags: "readonly", FirstKey: 1, LastKey: 1, Step: 1, ACL: "read hash slow", Group: g, Since: s, Summary: "Returns all fields in a hash.", Run: hkeysCmd},
		server.Command{Name: "hvals", Arity: 2, Flags: "readonly", FirstKey: 1, LastKey: 1, Step: 1, ACL: "read hash slow", Group: g, Since: s, Summary: "Returns all values in a hash.", Run: hvalsCmd},
		server.Command{Name: "hdel", Arity: -3, Flags: "write fast", FirstKey: 1, LastKey: 1, Step: 1, ACL: "write hash fast", Group: g, Since: s, Summary: "Deletes one or more fields and their values from a hash. Deletes the hash if no fields remain.", Run: hdelCmd},
		server.Command{Name: "hexists", Arity: 3, Flags: "readonly fast", FirstKey: 1, LastKey: 1, Step: 1, ACL: "read hash fast", Group: g, Since: s, Summary: "Determines whether a field exists in a hash.", Run: hexistsCmd},
		server.Command{Name: "hlen", Arity: 2, Flags: "readonly fast", FirstKey: 1, LastKey: 1, Step: 1, ACL: "read hash fast", Group: g, Since: s, Summary: "Returns the number of fields in a hash.", Run: hlenCmd},
		server.Command{Name: "hstrlen", Arity: 3, Flags: "readonly fast", FirstKey: 1, LastKey: 1, Step: 1, ACL: "read hash fast", Group: g, Since: "3.2.0", Summary: "Returns the length of the value of a field.", Run: hstrlenCmd},
		server.Command{Name: "hincrby", Arity: 4, Flags: "write denyoom fast", FirstKey: 1, LastKey: 1, Step: 1, ACL: "write hash fast", Group: g, Since: s, Summary: "Increments the integer value of a field in a hash by a number. Uses 0 as initial value if the field doesn't exist.", Run: hincrbyCmd},
		server.Command{Name: "hincrbyfloat", Arity: 4, Flags: "write denyoom fast", FirstKey: 1, LastKey: 1, Step: 1, ACL: "write hash fast", Group: g, Since: "2.6.0", Summary: "Increments the floating point value of a field by a number. Uses 0 as initial value if the field doesn't exist.", Run: hincrbyfloatCmd},
		server.Command{Name: "hrandfield", Arity: -2, Flags: "readonly", FirstKey: 1, LastKey: 1, Step: 1, ACL: "read hash slow", Group: g, Since: "6.2.0", Summary: "Returns one or more random fields from a hash.", Run: hrandfieldCmd},
		server.Command{Name: "hscan", Arity: -3, Flags: "readonly", FirstKey: 1, LastKey: 1, Step: 1, ACL: "read hash slow", Group: g, Since: "2.8.0", Summary: "Iterates over fields and values of a hash.", Run: hscanCmd},
	)
}

// readHash runs fn on key's hash; it replies WRONGTYPE itself and then
// returns ok false. found is false for a missing key (fn not called).
func readHash(x *server.Ctx, fn func(h *kinds.Hash)) (found, ok bool) {
	found, err := x.Store().ReadObject(x.Args()[1], store.KindHash, x.NowMs(), func(o store.Object) { fn(o.(*kinds.Hash)) })
	if err != nil {
		replyStoreErr(x, err)
		return false, false
	}
	return found, true
}

// writeHash runs fn on key's hash, creating it when create; store errors
// are replied and reported as ok false.
func writeHash(x *server.Ctx, create bool, fn func(h *kinds.Hash) bool) (ran, ok bool) {
	var mk func() store.Object
	if create {
		mk = newHash
	}
	ran, err := x.Store().WriteObject(x.Args()[1], store.KindHash, x.NowMs(), mk, func(o store.Object) bool { return fn(o.(*kinds.Hash)) })
	if err != nil {
		replyStoreErr(x, err)
		return false, false
	}
	return ran, true
}

func hsetCmd(x *server.Ctx) {
	args := x.Args()
	if len(args)%2 != 0 {
		arityErr(x)
		return
	}
	for _, a := range args[2:] {
		if elemTooBig(a) {
			x.Error(errTooBig)
			return
		}
	}
	added, big := 0, false
	_, ok := writeHash(x, true, func(h *kinds.Hash) bool {
		if tooBig(h.Len(), (len(args)-2)/2) { // else no count is needed: every field fits
			newFields := 0
			for i := 2; i < len(args); i += 2 {
				if _, had := h.Get(string(args[i])); !had {
					newFields++
				}
			}
			if tooBig(h.Len(), newFields) {
				big = true
				return false
			}
		}
		if h.Len() == 0 && len(args) > 4 {
			total, longest := 0, 0
			for _, a := range args[2:] {
				total, longest = total+len(a), max(longest, len(a))
			}
			h.Presize((len(args)-2)/2, total, longest) // one allocation, not one per size class
		}
		for i := 2; i < len(args); i += 2 {
			if h.SetTransient(store.KeyString(args[i]), store.KeyString(args[i+1])) { // copied where kept
				added++
			}
		}
		return true
	})
	switch {
	case !ok:
	case big:
		x.Error(errTooBig)
	case is(args[0], "hmset"):
		x.OK()
	default:
		x.Int(int64(added))
	}
}

func hsetnxCmd(x *server.Ctx) {
	args := x.Args()
	if elemTooBig(args[2]) || elemTooBig(args[3]) {
		x.Error(errTooBig)
		return
	}
	set, big := false, false
	if _, ok := writeHash(x, true, func(h *kinds.Hash) bool {
		if _, had := h.Get(string(args[2])); had {
			return false
		}
		if tooBig(h.Len(), 1) {
			big = true
			return false
		}
		h.Set(string(args[2]), string(args[3]))
		set = true
		return true
	}); !ok {
		return
	}
	if big {
		x.Error(errTooBig)
		return
	}
	x.Int(b2i(set))
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

func hgetCmd(x *server.Ctx) {
	field := x.Args()[2]
	replied := false
	found, ok := readHash(x, func(h *kinds.Hash) {
		if v, had := h.Get(store.KeyString(field)); had {
			x.BulkString(v)
			replied = true
		}
	})
	if ok && (!found || !replied) {
		x.Null()
	}
}

func hmgetCmd(x *server.Ctx) {
	fields := x.Args()[2:]
	found, ok := readHash(x, func(h *kinds.Hash) {
		x.Array(len(fields))
		for _, f := range fields {
			if v, had := h.Get(store.KeyString(f)); had {
				x.BulkString(v)
			} else {
				x.Null()
			}
		}
	})
	if ok && !found {
		x.Array(len(fields))
		for range fields {
			x.Null()
		}
	}
}

func hgetallCmd(x *server.Ctx) {
	found, ok := readHash(x, func(h *kinds.Hash) {
		x.Map(h.Len())
		h.Each(func(f, v string) bool { x.BulkString(f); x.BulkString(v); return true })
	})
	if ok && !found {
		x.Map(0)
	}
}

func hkeysCmd(x *server.Ctx) {
	found, ok := readHash(x, func(h *kinds.Hash) {
		x.Array(h.Len())
		h.Each(func(f, _ string) bool { x.BulkString(f); return true })
	})
	if ok && !found {
		x.Array(0)
	}
}

func hvalsCmd(x *server.Ctx) {
	found, ok := readHash(x, func(h *kinds.Hash) {
		x.Array(h.Len())
		h.Each(func(_, v string) bool { x.BulkString(v); return true })
	})
	if ok && !found {
		x.Array(0)
	}
}

func hdelCmd(x *server.Ctx) {
	args := x.Args()
	n := 0
	if _, ok := writeHash(x, false, func(h *kinds.Hash) bool {
		for _, f := range args[2:] {
			if h.Delete(store.KeyString(f)) {
				n++
			}
		}
		return n > 0
	}); ok {
		x.Int(int64(n))
	}
}

func hexistsCmd(x *server.Ctx) {
	var had bool
	if _, ok := readHash(x, func(h *kinds.Hash) { _, had = h.Get(store.KeyString(x.Args()[2])) }); ok {
		x.Int(b2i(had))
	}
}

func hlenCmd(x *server.Ctx) {
	n := 0
	if _, ok := readHash(x, func(h *kinds.Hash) { n = h.Len() }); ok {
		x.Int(int64(n))
	}
}

func hstrlenCmd(x *server.Ctx) {
	n := 0
	if _, ok := readHash(x, func(h *kinds.Hash) {
		v, _ := h.Get(store.KeyString(x.Args()[2]))
		n = len(v)
	}); ok {
		x.Int(int64(n))
	}
}

func hincrbyCmd(x *server.Ctx) {
	args := x.Args()
	incr, ok := parseInt(args[3])
	if !ok {
		x.Error(errNotInt)
		return
	}
	var errText string
	var result int64
	if _, ok := writeHash(x, true, func(h *kinds.Hash) bool {
		var cur int64
		if v, had := h.Get(string(args[2])); had {
			n, ok := parseInt([]byte(v))
			if !ok {
				errText = "ERR hash value is not an integer"
				return false
			}
			cur = n
		} else if tooBig(h.Len(), 1) {
			errText = errTooBig
			return false
		}
		if (incr < 0 && cur < 0 && incr < math.MinInt64-cur) || (incr > 0 && cur > 0 && incr > math.MaxInt64-cur) {
			errText = "ERR increment or decrement would overflow"
			return false
		}
		result = cur + incr
		h.Set(string(args[2]), strconv.FormatInt(result, 10))
		return true
	}); !ok {
		return
	}
	if errText != "" {
		x.Error(errText)
		return
	}
	x.Int(result)
}

func hincrbyfloatCmd(x *server.Ctx) {
	args := x.Args()
	// Redis adds in long double (x87, 64-bit significand), as INCRBYFLOAT:
	// kinds.IncrByFloat's arithmetic, so that a sum's last digits agree
	// (float64 gave 9223372036854776000 for 9223372036854775806 + 3,
	// Redis 9223372036854775809). CheckIncrByFloat checks the increment alone:
	// not a float, or an infinity. Plain decimals take kinds' allocation-free
	// long double path (~0.2-0.3 µs in-process; 1.3-2.2 µs of server CPU a
	// call over the socket, Redis 1.9-2.4); hex, inf and huge or tiny
	// magnitudes take math/big (~3 µs more).
	if err := kinds.CheckIncrByFloat(args[3]); err != nil {
		if errors.Is(err, kinds.ErrNotFloat) {
			x.Error(errNotFloat)
		} else {
			x.Error("ERR value is NaN or Infinity")
		}
		return
	}
	var errText, result string
	if _, ok := writeHash(x, true, func(h *kinds.Hash) bool {
		var cur []byte
		if v, had := h.Get(string(args[2])); had {
			cur = []byte(v)
		} else if tooBig(h.Len(), 1) {
			errText = errTooBig
			return false
		}
		sum, err := kinds.IncrByFloat(cur, args[3])
		switch {
		case errors.Is(err, kinds.ErrNotFloat): // the increment is one
			errText = "ERR hash value is not a float"
			return false
		case err != nil:
			errText = "ERR increment would produce NaN or Infinity"
			return false
		}
		result = sum
		h.Set(string(args[2]), result)
		return true
	}); !ok {
		return
	}
	if errText != "" {
		x.Error(errText)
		return
	}
	x.BulkString(result)
}

func hrandfieldCmd(x *server.Ctx) {
	args := x.Args()
	if len(args) == 2 {
		found, ok := readHash(x, func(h *kinds.Hash) { x.BulkString(h.At(rand.IntN(h.Len())).Field) })
		if ok && !found {
			x.Null()
		}
		return
	}
	count, ok := parseInt(args[2])
	if !ok {
		x.Error(errNotInt)
		return
	}
	if count == math.MinInt64 { // Redis: getRangeLongFromObjectOrReply(-LONG_MAX, LONG_MAX), before the syntax
		x.Error("ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807")
		return
	}
	withValues := false
	if len(args) == 4 {
		if !is(args[3], "withvalues") {
			x.Error(errSyntaxText)
			return
		}
		withValues = true
	} else if len(args) > 4 {
		x.Error(errSyntaxText)
		return
	}
	if withValues && (count < -math.MaxInt64/2 || count > math.MaxInt64/2) {
		x.Error("ERR value is out of range")
		return
	}
	found, ok := readHash(x, func(h *kinds.Hash) {
		emit := func(f kinds.HashField) {
			if withValues && x.RESP3() {
				x.Array(2)
			}
			x.BulkString(f.Field)
			if withValues {
				x.BulkString(f.Value)
			}
		}
		size := func(n int) int {
			if withValues && !x.RESP3() {
				return 2 * n
			}
			return n
		}
		n := h.Len()
		if count < 0 {
			c := -count
			if c > kinds.MaxElements {
				c = kinds.MaxElements // the reply is bounded like any value
			}
			// The fields once, in order (O(n) on a compact hash, whose
			// random At is O(n)), then c picks: O(n + c), as Redis.
			// A full hash's At is O(1): pick directly, O(c).
			at := h.At
			if n <= kinds.CompactMaxHashEntries {
				all := make([]kinds.HashField, 0, n)
				h.Each(func(f, v string) bool { all = append(all, kinds.HashField{Field: f, Value: v}); return true })
				at = func(i int) kinds.HashField { return all[i] }
			}
			x.Array(size(int(c)))
			for i := int64(0); i < c; i++ {
				emit(at(rand.IntN(n)))
			}
			return
		}
		if int(count) >= n {
			x.Array(size(n))
			h.Each(func(f, v string) bool { emit(kinds.HashField{Field: f, Value: v}); return true })
			return
		}
		// count distinct fields (pickDistinct: O(count) picks below a third
		// of n). A hash of up to CompactMaxHashEntries fields (maybe
		// compact, whose At walks from its first field) is read once
		// first: O(n + count); a full hash's At is O(1).
		at := h.At
		if n <= kinds.CompactMaxHashEntries {
			all := make([]kinds.HashField, 0, n)
			h.Each(func(f, v string) bool { all = append(all, kinds.HashField{Field: f, Value: v}); return true })
			at = func(i int) kinds.HashField { return all[i] }
		}
		x.Array(size(int(count)))
		pickDistinct(n, int(count), func(i int) { emit(at(i)) })
	})
	if ok && !found {
		x.Array(0)
	}
}

func hscanCmd(x *server.Ctx) {
	pattern, hasPattern, ok := scanArgs(x, x.Args()[2:])
	if !ok {
		return
	}
	found, ok := readHash(x, func(h *kinds.Hash) {
		var out []kinds.HashField
		h.Each(func(f, v string) bool {
			if !hasPattern || store.Match(pattern, f) {
				out = append(out, kinds.HashField{Field: f, Value: v})
			}
			return true
		})
		x.Array(2)
		x.BulkString("0")
		x.Array(2 * len(out))
		for _, f := range out {
			x.BulkString(f.Field)
			x.BulkString(f.Value)
		}
	})
	if ok && !found {
		x.Array(2)
		x.BulkString("0")
		x.Array(0)
	}
}
