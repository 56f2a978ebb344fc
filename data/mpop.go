package data

import (
	"math"
	"math/rand/v2"
	"strings"

	"github.com/celld/celld/kinds"
	"github.com/celld/celld/server"
	"github.com/celld/celld/store"
)

// LMPOP and ZMPOP (the non-blocking multi-key pops) and ZRANDMEMBER.

func init() {
	register(
		server.Command{Name: "lmpop", Arity: -4, Flags: "write movablekeys", FirstKey: 2, LastKey: 2, Step: 1, ACL: "write list slow", Group: "list", Since: "7.0.0",
			Summary: "Returns multiple elements from a list after removing them. Deletes the list if the last element was popped.", Run: func(x *server.Ctx) { mpopCmd(x, false) }},
		server.Command{Name: "zmpop", Arity: -4, Flags: "write movablekeys", FirstKey: 2, LastKey: 2, Step: 1, ACL: "write sortedset slow", Group: "sorted-set", Since: "7.0.0",
			Summary: "Returns the highest- or lowest-scoring members from one or more sorted sets after removing them. Deletes the sorted set if the last member was popped.", Run: func(x *server.Ctx) { mpopCmd(x, true) }},
		server.Command{Name: "zrandmember", Arity: -2, Flags: "readonly", FirstKey: 1, LastKey: 1, Step: 1, ACL: "read sortedset slow", Group: "sorted-set", Since: "6.2.0",
			Summary: "Returns one or more random members from a sorted set.", Run: zrandmemberCmd},
	)
}

func mpopCmd(x *server.Ctx, zset bool) {
	args := x.Args()
	n, ok := parseInt(args[1])
	if !ok || n < 1 {
		x.Error("ERR numkeys should be greater than 0")
		return
	}
	if n > int64(len(args)-3) {
		x.Error(errSyntaxText)
		return
	}
	keys := args[2 : 2+n]
	rest := args[2+n:]
	var first bool // LEFT / MIN
	switch {
	case !zset && is(rest[0], "left"), zset && is(rest[0], "min"):
		first = true
	case !zset && is(rest[0], "right"), zset && is(rest[0], "max"):
	default:
		x.Error(errSyntaxText)
		return
	}
	count := int64(1)
	if len(rest) > 1 {
		if len(rest) != 3 || !is(rest[1], "count") {
			x.Error(errSyntaxText)
			return
		}
		c, ok := parseInt(rest[2])
		if !ok || c < 1 {
			x.Error("ERR count should be greater than 0")
			return
		}
		count = c
	}
	kind, mk := store.KindList, newList
	if zset {
		kind, mk = store.KindZSet, newZSet
	}
	_ = mk
	for _, key := range keys {
		popped := false
		_, err := x.Store().WriteObject(key, kind, x.NowMs(), nil, func(o store.Object) bool {
			k := int(min(count, int64(o.Len())))
			x.Array(2)
			x.Bulk(key)
			if !zset {
				l := o.(*kinds.List)
				x.Array(k)
				for i := 0; i < k; i++ {
					if first {
						x.BulkString(l.PopFront())
					} else {
						x.BulkString(l.PopBack())
					}
				}
			} else {
				z := o.(*kinds.ZSet)
				var out []kinds.Element
				// cloned: a compact set's members point into bytes Remove rewrites
				z.RangeByRank(0, k-1, !first, func(m string, s float64) bool {
					out = append(out, kinds.Element{Member: strings.Clone(m), Score: s})
					return true
				})
				for _, e := range out {
					z.Remove(e.Member)
				}
				x.Array(len(out))
				for _, e := range out {
					x.Array(2)
					x.BulkString(e.Member)
					x.Double(e.Score)
				}
			}
			popped = true
			return true
		})
		if err != nil {
			replyStoreErr(x, err)
			return
		}
		if popped {
			return
		}
	}
	x.NullArray()
}

func zrandmemberCmd(x *server.Ctx) {
	args := x.Args()
	if len(args) == 2 {
		found, ok := readZSet(x, func(z *kinds.ZSet) {
			z.RangeByRank(rand.IntN(z.Len()), z.Len()-1, false, func(m string, _ float64) bool { x.BulkString(m); return false })
		})
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
	withScores := false
	if len(args) == 4 && is(args[3], "withscores") {
		withScores = true
	} else if len(args) > 3 {
		x.Error(errSyntaxText)
		return
	}
	if withScores && (count < -math.MaxInt64/2 || count > math.MaxInt64/2) {
		x.Error("ERR value is out of range")
		return
	}
	found, ok := readZSet(x, func(z *kinds.ZSet) {
		// The reply streams: a pair is [member, score] in RESP3, flat in
		// RESP2 (replyElements's shapes), without building the whole list.
		emit := func(e kinds.Element) {
			if withScores && x.RESP3() {
				x.Array(2)
			}
			x.BulkString(e.Member)
			if withScores {
				x.Double(e.Score)
			}
		}
		size := func(n int) int {
			if withScores && !x.RESP3() {
				return 2 * n
			}
			return n
		}
		n := z.Len()
		// A set of up to CompactMaxEntries members (maybe compact, whose At
		// walks from its first member) is read once before picking;
		// a bigger (full) one is picked from with At, O(log n) each.
		at := z.At
		if n <= kinds.CompactMaxEntries {
			all := make([]kinds.Element, 0, n)
			z.Each(func(m string, s float64) bool { all = append(all, kinds.Element{Member: m, Score: s}); return true })
			at = func(i int) kinds.Element { return all[i] }
		}
		switch {
		case count < 0:
			// c picks with repeats: O(c log n), as Redis's case 1.
			c := min(-count, kinds.MaxElements) // the reply is bounded like any value
			x.Array(size(int(c)))
			for i := int64(0); i < c; i++ {
				emit(at(rand.IntN(n)))
			}
		case int(count) >= n:
			// The whole set, in order (Redis's case 2).
			x.Array(size(n))
			z.Each(func(m string, s float64) bool { emit(kinds.Element{Member: m, Score: s}); return true })
		default:
			// count distinct members (pickDistinct: O(count log n) below
			// a third of n, as Redis's case 4; else case 3, where a big
			// set is read once so each pick is O(1): O(n)).
			if int(count)*3 >= n && n > kinds.CompactMaxEntries {
				all := make([]kinds.Element, 0, n)
				z.Each(func(m string, s float64) bool { all = append(all, kinds.Element{Member: m, Score: s}); return true })
				at = func(i int) kinds.Element { return all[i] }
			}
			x.Array(size(int(count)))
			pickDistinct(n, int(count), func(i int) { emit(at(i)) })
		}
	})
	if ok && !found {
		x.Array(0)
	}
}
