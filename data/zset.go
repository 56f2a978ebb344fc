package data

import (
	"math"
	"slices"
	"strings"

	"github.com/celld/celld/kinds"
	"github.com/celld/celld/server"
	"github.com/celld/celld/store"
)

// Sorted-set commands (Redis 7's): ZADD ZINCRBY ZREM ZCARD ZSCORE ZMSCORE
// ZCOUNT ZLEXCOUNT ZRANK ZREVRANK ZRANGE ZREVRANGE ZRANGEBYSCORE
// ZREVRANGEBYSCORE ZRANGEBYLEX ZREVRANGEBYLEX ZREMRANGEBYSCORE
// ZREMRANGEBYRANK ZREMRANGEBYLEX ZPOPMIN ZPOPMAX ZSCAN.

const (
	errMinMaxFloat = "ERR min or max is not a float"
	errMinMaxLex   = "ERR min or max not valid string range item"
)

func init() {
	const g = "sorted-set"
	c := func(name string, arity int, flags, acl, since, summary string, run server.Handler) server.Command {
		return server.Command{Name: name, Arity: arity, Flags: flags, FirstKey: 1, LastKey: 1, Step: 1, ACL: acl, Group: g, Since: since, Summary: summary, Run: run}
	}
	register(
		c("zadd", -4, "write denyoom fast", "write sortedset fast", "1.2.0", "Adds one or more members to a sorted set, or updates their scores. Creates the key if it doesn't exist.", zaddCmd),
		c("zincrby", 4, "write denyoom fast", "write sortedset fast", "1.2.0", "Increments the score of a member in a sorted set.", zincrbyCmd),
		c("zrem", -3, "write fast", "write sortedset fast", "1.2.0", "Removes one or more members from a sorted set. Deletes the sorted set if all members were removed.", zremCmd),
		c("zcard", 2, "readonly fast", "read sortedset fast", "1.2.0", "Returns the number of members in a sorted set.", zcardCmd),
		c("zscore", 3, "readonly fast", "read sortedset fast", "1.2.0", "Returns the score of a member in a sorted set.", zscoreCmd),
		c("zmscore", -3, "readonly fast", "read sortedset fast", "6.2.0", "Returns the score of one or more members in a sorted set.", zmscoreCmd),
		c("zcount", 4, "readonly fast", "read sortedset fast", "2.0.0", "Returns the count of members in a sorted set that have scores within a range.", zcountCmd),
		c("zlexcount", 4, "readonly fast", "read sortedset fast", "2.8.9", "Returns the number of members in a sorted set within a lexicographical range.", zlexcountCmd),
		c("zrank", 3, "readonly fast", "read sortedset fast", "2.0.0", "Returns the index of a member in a sorted set ordered by ascending scores.", func(x *server.Ctx) { zrankCmd(x, false) }),
		c("zrevrank", 3, "readonly fast", "read sortedset fast", "2.0.0", "Returns the index of a member in a sorted set ordered by descending scores.", func(x *server.Ctx) { zrankCmd(x, true) }),
		c("zrange", -4, "readonly", "read sortedset slow", "1.2.0", "Returns members in a sorted set within a range of indexes.", func(x *server.Ctx) { zrangeCmd(x, zrangeAuto, false) }),
		c("zrevrange", -4, "readonly", "read sortedset slow", "1.2.0", "Returns members in a sorted set within a range of indexes in reverse order.", func(x *server.Ctx) { zrangeCmd(x, zrangeRank, true) }),
		c("zrangebyscore", -4, "readonly", "read sortedset slow", "1.0.5", "Returns members in a sorted set within a range of scores.", func(x *server.Ctx) { zrangeCmd(x, zrangeScore, false) }),
		c("zrevrangebyscore", -4, "readonly", "read sortedset slow", "2.2.0", "Returns members in a sorted set within a range of scores in reverse order.", func(x *server.Ctx) { zrangeCmd(x, zrangeScore, true) }),
		c("zrangebylex", -4, "readonly", "read sortedset slow", "2.8.9", "Returns members in a sorted set within a lexicographical range.", func(x *server.Ctx) { zrangeCmd(x, zrangeLex, false) }),
		c("zrevrangebylex", -4, "readonly", "read sortedset slow", "2.8.9", "Returns members in a sorted set within a lexicographical range in reverse order.", func(x *server.Ctx) { zrangeCmd(x, zrangeLex, true) }),
		c("zremrangebyscore", 4, "write", "write sortedset slow", "1.2.0", "Removes members in a sorted set within a range of scores. Deletes the sorted set if all members were removed.", func(x *server.Ctx) { zremrangeCmd(x, zrangeScore) }),
		c("zremrangebyrank", 4, "write", "write sortedset slow", "2.0.0", "Removes members in a sorted set within a range of indexes. Deletes the sorted set if all members were removed.", func(x *server.Ctx) { zremrangeCmd(x, zrangeRank) }),
		c("zremrangebylex", 4, "write", "write sortedset slow", "2.8.9", "Removes members in a sorted set within a lexicographical range. Deletes the sorted set if all members were removed.", func(x *server.Ctx) { zremrangeCmd(x, zrangeLex) }),
		c("zpopmin", -2, "write fast", "write sortedset fast", "5.0.0", "Returns the lowest-scoring members from a sorted set after removing them. Deletes the sorted set if the last member was popped.", func(x *server.Ctx) { zpopCmd(x, false) }),
		c("zpopmax", -2, "write fast", "write sortedset fast", "5.0.0", "Returns the highest-scoring members from a sorted set after removing them. Deletes the sorted set if the last member was popped.", func(x *server.Ctx) { zpopCmd(x, true) }),
		server.Command{Name: "zrangestore", Arity: -5, Flags: "write denyoom", FirstKey: 1, LastKey: 2, Step: 1, ACL: "write sortedset slow", Group: g, Since: "6.2.0",
			Summary: "Stores a range of members from sorted set in a key.", Run: func(x *server.Ctx) { zrangeGeneric(x, 2, zrangeAuto, false, true) }},
		c("zscan", -3, "readonly", "read sortedset slow", "2.8.0", "Iterates over members and scores of a sorted set.", zscanCmd),
	)
}

func readZSet(x *server.Ctx, fn func(z *kinds.ZSet)) (found, ok bool) {
	found, err := x.Store().ReadObject(x.Args()[1], store.KindZSet, x.NowMs(), func(o store.Object) { fn(o.(*kinds.ZSet)) })
	if err != nil {
		replyStoreErr(x, err)
		return false, false
	}
	return found, true
}

func writeZSet(x *server.Ctx, create bool, fn func(z *kinds.ZSet) bool) (ran, ok bool) {
	var mk func() store.Object
	if create {
		mk = newZSet
	}
	ran, err := x.Store().WriteObject(x.Args()[1], store.KindZSet, x.NowMs(), mk, func(o store.Object) bool { return fn(o.(*kinds.ZSet)) })
	if err != nil {
		replyStoreErr(x, err)
		return false, false
	}
	return ran, true
}

// zaddFlags are ZADD's options.
type zaddFlags struct{ nx, xx, gt, lt, ch, incr bool }

func zaddCmd(x *server.Ctx) {
	args := x.Args()
	var f zaddFlags
	i := 2
	for ; i < len(args); i++ {
		a := args[i]
		switch {
		case is(a, "nx"):
			f.nx = true
		case is(a, "xx"):
			f.xx = true
		case is(a, "gt"):
			f.gt = true
		case is(a, "lt"):
			f.lt = true
		case is(a, "ch"):
			f.ch = true
		case is(a, "incr"):
			f.incr = true
		default:
			goto pairs
		}
	}
pairs:
	rest := args[i:]
	if len(rest) == 0 || len(rest)%2 != 0 {
		x.Error(errSyntaxText)
		return
	}
	if f.nx && f.xx {
		x.Error("ERR XX and NX options at the same time are not compatible")
		return
	}
	if (f.gt && f.nx) || (f.lt && f.nx) || (f.gt && f.lt) {
		x.Error("ERR GT, LT, and/or NX options at the same time are not compatible")
		return
	}
	if f.incr && len(rest) > 2 {
		x.Error("ERR INCR option supports a single increment-element pair")
		return
	}
	scores := make([]float64, len(rest)/2)
	for j := range scores {
		s, ok := kinds.ParseScore(rest[2*j])
		if !ok {
			x.Error(errNotFloat)
			return
		}
		scores[j] = s
		if elemTooBig(rest[2*j+1]) {
			x.Error(errTooBig)
			return
		}
	}
	zaddApply(x, f, scores, rest)
}

// zaddApply applies ZADD (or ZINCRBY, as ZADD INCR) and replies.
func zaddApply(x *server.Ctx, f zaddFlags, scores []float64, rest [][]byte) {
	var added, changed int
	var errText string
	var incrResult float64
	incrDone := false
	if _, ok := writeZSet(x, !f.xx, func(z *kinds.ZSet) bool {
		if !f.xx && tooBig(z.Len(), len(scores)) { // else every member fits: no count needed
			newMembers := 0
			for j := range scores {
				if _, had := z.Score(store.KeyString(rest[2*j+1])); !had {
					newMembers++
				}
			}
			if tooBig(z.Len(), newMembers) {
				errText = errTooBig
				return false
			}
		}
		if z.Len() == 0 && len(scores) > 1 && !f.xx && !f.incr {
			z.Presize(scores, func(j int) int { return len(rest[2*j+1]) }) // one allocation, not one per size class
		}
		for j, score := range scores {
			member := store.KeyString(rest[2*j+1])
			cur, had := z.Score(member)
			if had {
				if f.nx {
					continue
				}
				if f.incr {
					score += cur
					if math.IsNaN(score) {
						errText = "ERR resulting score is not a number (NaN)"
						break
					}
				}
				if (f.gt && score <= cur) || (f.lt && score >= cur) {
					continue
				}
				incrResult, incrDone = score, true
				if score != cur {
					z.SetTransient(member, score) // copied where kept
					changed++
				}
				continue
			}
			if f.xx {
				continue
			}
			z.SetTransient(member, score) // copied where kept
			added++
			incrResult, incrDone = score, true
		}
		return added+changed > 0
	}); !ok {
		return
	}
	switch {
	case errText != "":
		x.Error(errText)
	case f.incr && incrDone:
		x.Double(incrResult)
	case f.incr:
		x.Null()
	case f.ch:
		x.Int(int64(added + changed))
	default:
		x.Int(int64(added))
	}
}

func zincrbyCmd(x *server.Ctx) {
	args := x.Args()
	s, ok := kinds.ParseScore(args[2])
	if !ok {
		x.Error(errNotFloat)
		return
	}
	if elemTooBig(args[3]) {
		x.Error(errTooBig)
		return
	}
	zaddApply(x, zaddFlags{incr: true}, []float64{s}, args[2:4])
}

func zremCmd(x *server.Ctx) {
	n := 0
	if _, ok := writeZSet(x, false, func(z *kinds.ZSet) bool {
		for _, m := range x.Args()[2:] {
			if z.Remove(store.KeyString(m)) {
				n++
			}
		}
		return n > 0
	}); ok {
		x.Int(int64(n))
	}
}

func zcardCmd(x *server.Ctx) {
	n := 0
	if _, ok := readZSet(x, func(z *kinds.ZSet) { n = z.Len() }); ok {
		x.Int(int64(n))
	}
}

func zscoreCmd(x *server.Ctx) {
	var s float64
	var had bool
	if _, ok := readZSet(x, func(z *kinds.ZSet) { s, had = z.Score(store.KeyString(x.Args()[2])) }); !ok {
		return
	}
	if had {
		x.Double(s)
	} else {
		x.Null()
	}
}

func zmscoreCmd(x *server.Ctx) {
	members := x.Args()[2:]
	found, ok := readZSet(x, func(z *kinds.ZSet) {
		x.Array(len(members))
		for _, m := range members {
			if s, had := z.Score(store.KeyString(m)); had {
				x.Double(s)
			} else {
				x.Null()
			}
		}
	})
	if ok && !found {
		x.Array(len(members))
		for range members {
			x.Null()
		}
	}
}

func parseScoreRange(min, max []byte) (kinds.ScoreRange, bool) {
	var r kinds.ScoreRange
	var ok1, ok2 bool
	r.Min, r.MinEx, ok1 = kinds.ParseScoreBound(min)
	r.Max, r.MaxEx, ok2 = kinds.ParseScoreBound(max)
	return r, ok1 && ok2
}

func parseLexRange(min, max []byte) (kinds.LexRange, bool) {
	a, ok1 := kinds.ParseLexBound(min)
	b, ok2 := kinds.ParseLexBound(max)
	return kinds.LexRange{Min: a, Max: b}, ok1 && ok2
}

func zcountCmd(x *server.Ctx) {
	r, ok := parseScoreRange(x.Args()[2], x.Args()[3])
	if !ok {
		x.Error(errMinMaxFloat)
		return
	}
	n := 0
	if _, ok := readZSet(x, func(z *kinds.ZSet) { n = z.CountByScore(r) }); ok {
		x.Int(int64(n))
	}
}

func zlexcountCmd(x *server.Ctx) {
	r, ok := parseLexRange(x.Args()[2], x.Args()[3])
	if !ok {
		x.Error(errMinMaxLex)
		return
	}
	n := 0
	if _, ok := readZSet(x, func(z *kinds.ZSet) { n = z.CountByLex(r) }); ok {
		x.Int(int64(n))
	}
}

func zrankCmd(x *server.Ctx, rev bool) {
	var rank, n int
	var had bool
	if _, ok := readZSet(x, func(z *kinds.ZSet) { rank, had = z.Rank(store.KeyString(x.Args()[2])); n = z.Len() }); !ok {
		return
	}
	if !had {
		x.Null()
		return
	}
	if rev {
		rank = n - 1 - rank
	}
	x.Int(int64(rank))
}

// The ways a ZRANGE-family command reads its range.
const (
	zrangeAuto  = iota // ZRANGE: rank unless BYSCORE/BYLEX
	zrangeRank         // by index
	zrangeScore        // by score
	zrangeLex          // by member
)

// zrangeCmd is every ZRANGE form. mode and rev come from the command name;
// ZRANGE's own options may set them.
func zrangeCmd(x *server.Ctx, mode int, rev bool) { zrangeGeneric(x, 1, mode, rev, false) }

// zrangeGeneric is the ZRANGE family with the source key at args[k] (2
// for ZRANGESTORE, whose destination is args[1] and which stores instead
// of replying the elements).
func zrangeGeneric(x *server.Ctx, k int, mode int, rev bool, storeTo bool) {
	args := x.Args()
	withScores, hasLimit := false, false
	offset, limit := int64(0), int64(-1)
	isZrange := mode == zrangeAuto
	if isZrange {
		mode = zrangeRank
	}
	for i := k + 3; i < len(args); i++ {
		a := args[i]
		switch {
		case is(a, "withscores") && !storeTo:
			withScores = true
		case is(a, "limit") && i+2 < len(args):
			o, ok1 := parseInt(args[i+1])
			l, ok2 := parseInt(args[i+2])
			if !ok1 || !ok2 {
				x.Error(errNotInt)
				return
			}
			offset, limit, hasLimit = o, l, true
			i += 2
		case isZrange && is(a, "rev"):
			rev = true
		case isZrange && is(a, "byscore"):
			mode = zrangeScore
		case isZrange && is(a, "bylex"):
			mode = zrangeLex
		default:
			x.Error(errSyntaxText)
			return
		}
	}
	if hasLimit && limit != -1 && mode == zrangeRank { // Redis takes LIMIT off -1 with a rank range (and ignores it)
		x.Error("ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX")
		return
	}
	if withScores && mode == zrangeLex {
		x.Error("ERR syntax error, WITHSCORES not supported in combination with BYLEX")
		return
	}
	lo, hi := args[k+1], args[k+2]
	if rev && mode != zrangeRank {
		lo, hi = hi, lo // the reverse forms take max first
	}
	var (
		start, stop int64
		sr          kinds.ScoreRange
		lr          kinds.LexRange
		ok          bool
	)
	switch mode {
	case zrangeRank:
		var ok1, ok2 bool
		start, ok1 = parseInt(lo)
		stop, ok2 = parseInt(hi)
		if !ok1 || !ok2 {
			x.Error(errNotInt)
			return
		}
	case zrangeScore:
		if sr, ok = parseScoreRange(lo, hi); !ok {
			x.Error(errMinMaxFloat)
			return
		}
	case zrangeLex:
		if lr, ok = parseLexRange(lo, hi); !ok {
			x.Error(errMinMaxLex)
			return
		}
	}
	var out []kinds.Element
	collect := func(m string, s float64) bool {
		if limit >= 0 && int64(len(out)) >= limit {
			return false
		}
		// stored after the source's lock is released
		m = strings.Clone(m) // a compact set's members point into its bytes
		out = append(out, kinds.Element{Member: m, Score: s})
		return true
	}
	found, err := x.Store().ReadObject(args[k], store.KindZSet, x.NowMs(), func(o store.Object) {
		z := o.(*kinds.ZSet)
		if !storeTo {
			// The reply is written as the set is walked, its length
			// counted first (O(log n) for a full set): a range of a
			// million elements is never held as a slice (24 MB that the
			// GC would then scan), as Redis writes it.
			zrangeReply(x, z, mode, rev, start, stop, sr, lr, offset, limit, withScores)
			return
		}
		switch mode {
		case zrangeRank:
			if a, b, nonEmpty := rangeIndexes(start, stop, z.Len()); nonEmpty {
				out = make([]kinds.Element, 0, b-a+1)
				z.RangeByRank(a, b, rev, collect)
			}
		case zrangeScore:
			if offset >= 0 && limit != 0 {
				z.RangeByScore(sr, rev, int(min(offset, math.MaxInt32)), collect)
			}
		case zrangeLex:
			if offset >= 0 && limit != 0 {
				z.RangeByLex(lr, rev, int(min(offset, math.MaxInt32)), collect)
			}
		}
	})
	if err != nil {
		replyStoreErr(x, err)
		return
	}
	if storeTo {
		// redis-server 7.0 starts ZRANGESTORE's destination compact
		// unless it is a rank range of more than 128 members: the members
		// stored before it turns full lose a -0's sign there.
		if mode != zrangeRank || len(out) <= kinds.CompactMaxEntries {
			zeroCompactPrefix(out)
		}
		if rev {
			slices.Reverse(out) // sorted, for fillZSet's one pass
		}
		zstore(x, args[1], out)
		return
	}
	if !found {
		x.Array(0)
	}
}

// zrangeReply replies the ZRANGE range of z (mode, rev, its bounds,
// offset and limit as zrangeGeneric parsed them) as replyElements would
// the collected slice, walking z once after counting the range. The
// caller holds z's read lock; cost O(log n + offset + reply).
func zrangeReply(x *server.Ctx, z *kinds.ZSet, mode int, rev bool, start, stop int64,
	sr kinds.ScoreRange, lr kinds.LexRange, offset, limit int64, withScores bool) {
	n := int64(0)
	switch mode {
	case zrangeRank:
		if a, b, nonEmpty := rangeIndexes(start, stop, z.Len()); nonEmpty {
			n = int64(b - a + 1)
			start = int64(a)
			stop = int64(b)
		}
	case zrangeScore, zrangeLex:
		if offset >= 0 && limit != 0 {
			if mode == zrangeScore {
				n = int64(z.CountByScore(sr))
			} else {
				n = int64(z.CountByLex(lr))
			}
			n = max(n-offset, 0)
			if limit > 0 {
				n = min(n, limit)
			}
		}
	}
	elementsHeader(x, int(n), withScores, true)
	if n == 0 {
		return
	}
	pair := withScores && x.RESP3()
	left := n
	put := func(m string, s float64) bool {
		putElement(x, m, s, withScores, pair)
		left--
		return left > 0
	}
	switch mode {
	case zrangeRank:
		z.RangeByRank(int(start), int(stop), rev, put)
	case zrangeScore:
		z.RangeByScore(sr, rev, int(offset), put)
	case zrangeLex:
		z.RangeByLex(lr, rev, int(offset), put)
	}
	for ; left > 0; left-- { // never: the count and the walk agree; keeps the reply framed
		putElement(x, "", 0, withScores, pair)
	}
}

// zstore replaces dst, whatever it held, by a sorted set of out (deletes
// it when out is empty) and replies the count. The elements' strings are
// the caller's own copies (zrangeGeneric's collect clones them), which
// the new set keeps: cloning them again cost a million allocations more
// for a million-member ZRANGESTORE.
func zstore(x *server.Ctx, dst []byte, out []kinds.Element) {
	x.Store().Delete(dst, x.NowMs())
	if len(out) > 0 {
		_, err := x.Store().WriteObject(dst, store.KindZSet, x.NowMs(), newZSet, func(o store.Object) bool {
			fillZSet(o.(*kinds.ZSet), out)
			return true
		})
		if err != nil {
			replyStoreErr(x, err)
			return
		}
	}
	x.Int(int64(len(out)))
}

// fillZSet puts out, sorted as a sorted set orders its members, into z
// (the store's new, empty destination): in one pass (kinds.LoadSorted)
// when it is past the compact limits, else by Set (a skiplist search from
// the head each, a member map grown from empty: ~35% slower for 200k
// members). The members are kept, not cloned.
//
// A -0 score keeps its sign unless the result fits the compact form, as in
// redis-server's ZUNIONSTORE/ZINTERSTORE/ZDIFFSTORE, which build a skiplist
// and convert it only when it fits: a member longer than CompactMaxValue is
// set first, so that z is full before any -0 is stored. (ZRANGESTORE clears
// the signs its compact start loses first: zeroCompactPrefix.)
func fillZSet(z *kinds.ZSet, out []kinds.Element) {
	if z.LoadSorted(out) {
		return
	}
	for _, e := range out {
		if len(e.Member) > kinds.CompactMaxValue {
			z.Set(e.Member, e.Score)
			break
		}
	}
	for _, e := range out {
		z.Set(e.Member, e.Score)
	}
}

// zeroCompactPrefix turns the -0 scores of out's leading members that
// redis-server stores in a compact (listpack) destination, added one at a
// time in out's order, into 0: the listpack keeps no sign of zero, and it
// turns into a skiplist at the first member past CompactMaxEntries or
// longer than CompactMaxValue, which keeps the sign from there on. O(128).
func zeroCompactPrefix(out []kinds.Element) {
	for i := range out {
		if i >= kinds.CompactMaxEntries || len(out[i].Member) > kinds.CompactMaxValue {
			return
		}
		if out[i].Score == 0 {
			out[i].Score = 0
		}
	}
}

// replyElements writes members (with their scores when withScores): a flat
// array in RESP2; in RESP3 an array of [member, score] pairs when nested,
// else flat.
func replyElements(x *server.Ctx, out []kinds.Element, withScores, nested bool) {
	emitElements(x, len(out), func(i int) kinds.Element { return out[i] }, withScores, nested)
}

// emitElements is replyElements for n elements given one at a time by at,
// so that a reply of many picks (ZRANDMEMBER with a negative count) is
// written as it is made, never held as a slice first.
func emitElements(x *server.Ctx, n int, at func(i int) kinds.Element, withScores, nested bool) {
	elementsHeader(x, n, withScores, nested)
	pair := withScores && nested && x.RESP3()
	for i := range n {
		e := at(i)
		putElement(x, e.Member, e.Score, withScores, pair)
	}
}

// elementsHeader starts the reply of n elements as emitElements shapes it:
// n entries, or 2n flat ones for scores unless they go in RESP3 pairs.
func elementsHeader(x *server.Ctx, n int, withScores, nested bool) {
	if withScores && !(nested && x.RESP3()) {
		x.Array(2 * n)
		return
	}
	x.Array(n)
}

// putElement writes one element after elementsHeader: the member, its
// score when withScores, the two in an array of 2 when pair (RESP3,
// nested).
func putElement(x *server.Ctx, m string, s float64, withScores, pair bool) {
	if pair {
		x.Array(2)
	}
	x.BulkString(m)
	if withScores {
		x.Double(s)
	}
}

func zremrangeCmd(x *server.Ctx, mode int) {
	args := x.Args()
	var (
		start, stop int64
		sr          kinds.ScoreRange
		lr          kinds.LexRange
		ok          bool
	)
	switch mode {
	case zrangeRank:
		var ok1, ok2 bool
		start, ok1 = parseInt(args[2])
		stop, ok2 = parseInt(args[3])
		if !ok1 || !ok2 {
			x.Error(errNotInt)
			return
		}
	case zrangeScore:
		if sr, ok = parseScoreRange(args[2], args[3]); !ok {
			x.Error(errMinMaxFloat)
			return
		}
	case zrangeLex:
		if lr, ok = parseLexRange(args[2], args[3]); !ok {
			x.Error(errMinMaxLex)
			return
		}
	}
	n := 0
	if _, ok := writeZSet(x, false, func(z *kinds.ZSet) bool {
		switch mode {
		case zrangeRank:
			if a, b, nonEmpty := rangeIndexes(start, stop, z.Len()); nonEmpty {
				n = z.RemoveRangeByRank(a, b, nil)
			}
		case zrangeScore:
			n = z.RemoveRangeByScore(sr, nil)
		case zrangeLex:
			n = z.RemoveRangeByLex(lr, nil)
		}
		return n > 0
	}); ok {
		x.Int(int64(n))
	}
}

func zpopCmd(x *server.Ctx, max bool) {
	args := x.Args()
	if len(args) > 3 {
		x.Error(errSyntaxText)
		return
	}
	count, withCount := int64(1), len(args) == 3
	if withCount {
		// Redis 7 (getPositiveLongFromObjectOrReply) answers a count that
		// is not an integer with the same error as a negative one.
		c, ok := parseInt(args[2])
		if !ok || c < 0 {
			x.Error(errPositive)
			return
		}
		count = c
	}
	// The reply is written as the popped run is walked, then the run is
	// unlinked in one walk (RemoveRangeByRank), as Redis pops: no slice
	// of a million cloned members, no search per member. WriteObject
	// fails only before fn runs, so nothing is replied twice.
	replied := false
	if _, ok := writeZSet(x, false, func(z *kinds.ZSet) bool {
		n := int(min(count, int64(z.Len())))
		if n == 0 {
			return false
		}
		elementsHeader(x, n, true, withCount)
		pair := withCount && x.RESP3()
		z.RangeByRank(0, n-1, max, func(m string, s float64) bool {
			putElement(x, m, s, true, pair)
			return true
		})
		if max {
			z.RemoveRangeByRank(z.Len()-n, z.Len()-1, nil)
		} else {
			z.RemoveRangeByRank(0, n-1, nil)
		}
		replied = true
		return true
	}); !ok {
		return
	}
	if !replied {
		elementsHeader(x, 0, true, withCount)
	}
}

func zscanCmd(x *server.Ctx) {
	pattern, hasPattern, ok := scanArgs(x, x.Args()[2:])
	if !ok {
		return
	}
	found, ok := readZSet(x, func(z *kinds.ZSet) {
		var out []kinds.Element
		z.Each(func(m string, s float64) bool {
			if !hasPattern || store.Match(pattern, m) {
				out = append(out, kinds.Element{Member: m, Score: s})
			}
			return true
		})
		x.Array(2)
		x.BulkString("0")
		x.Array(2 * len(out))
		for _, e := range out {
			x.BulkString(e.Member)
			x.Bulk(server.AppendScore(nil, e.Score))
		}
	})
	if ok && !found {
		x.Array(2)
		x.BulkString("0")
		x.Array(0)
	}
}
