package data

import (
	"math"
	"slices"
	"strings"

	"github.com/celld/celld/kinds"
	"github.com/celld/celld/server"
	"github.com/celld/celld/store"
)

// ZUNION ZINTER ZDIFF (and their STORE forms) and ZINTERCARD: Redis 7's
// set algebra over sorted sets. Each source is read under its own shard
// lock and copied out (O(its size)); the result is computed without locks
// and, for the STORE forms, replaces the destination whatever it held. The
// sources are not read atomically together outside MULTI/EXEC or a script
// (which run isolated). Regular sets are not a celld kind: a source of any
// kind but a sorted set is WRONGTYPE.

func init() {
	const g = "sorted-set"
	mk := func(name string, arity, first int, flags, acl, since, summary string, run server.Handler) server.Command {
		return server.Command{Name: name, Arity: arity, Flags: flags + " movablekeys", FirstKey: first, LastKey: first, Step: 1, ACL: acl, Group: g, Since: since, Summary: summary, Run: run}
	}
	register(
		mk("zunionstore", -4, 1, "write denyoom", "write sortedset slow", "2.0.0", "Stores the union of multiple sorted sets in a key.", func(x *server.Ctx) { zsetOpCmd(x, opUnion, true) }),
		mk("zinterstore", -4, 1, "write denyoom", "write sortedset slow", "2.0.0", "Stores the intersect of multiple sorted sets in a key.", func(x *server.Ctx) { zsetOpCmd(x, opInter, true) }),
		mk("zdiffstore", -4, 1, "write denyoom", "write sortedset slow", "6.2.0", "Stores the difference of multiple sorted sets in a key.", func(x *server.Ctx) { zsetOpCmd(x, opDiff, true) }),
		mk("zunion", -3, 2, "readonly", "read sortedset slow", "6.2.0", "Returns the union of multiple sorted sets.", func(x *server.Ctx) { zsetOpCmd(x, opUnion, false) }),
		mk("zinter", -3, 2, "readonly", "read sortedset slow", "6.2.0", "Returns the intersect of multiple sorted sets.", func(x *server.Ctx) { zsetOpCmd(x, opInter, false) }),
		mk("zdiff", -3, 2, "readonly", "read sortedset slow", "6.2.0", "Returns the difference between multiple sorted sets.", func(x *server.Ctx) { zsetOpCmd(x, opDiff, false) }),
		mk("zintercard", -3, 2, "readonly", "read sortedset slow", "7.0.0", "Returns the number of members of the intersect of multiple sorted sets.", zintercardCmd),
	)
}

const (
	opUnion = iota
	opInter
	opDiff
)

// readSources copies the sorted sets named by keys (missing ones empty).
func readSources(x *server.Ctx, keys [][]byte) ([]map[string]float64, bool) {
	out := make([]map[string]float64, len(keys))
	for i, k := range keys {
		m := map[string]float64{}
		_, err := x.Store().ReadObject(k, store.KindZSet, x.NowMs(), func(o store.Object) {
			o.(*kinds.ZSet).Each(func(member string, s float64) bool { m[strings.Clone(member)] = s; return true })
		})
		if err != nil {
			replyStoreErr(x, err)
			return nil, false
		}
		out[i] = m
	}
	return out, true
}

// numKeys parses numkeys at args[i] and returns the keys after it.
func numKeys(x *server.Ctx, args [][]byte, i int) ([][]byte, bool) {
	n, ok := parseInt(args[i])
	if !ok {
		x.Error(errNotInt)
		return nil, false
	}
	if n < 1 {
		x.Error("ERR at least 1 input key is needed for '" + lowerString(args[0]) + "' command")
		return nil, false
	}
	if n > int64(len(args)-i-1) {
		x.Error(errSyntaxText)
		return nil, false
	}
	return args[i+1 : i+1+int(n)], true
}

func zsetOpCmd(x *server.Ctx, op int, store_ bool) {
	args := x.Args()
	at := 1
	if store_ {
		at = 2
	}
	keys, ok := numKeys(x, args, at)
	if !ok {
		return
	}
	weights := make([]float64, len(keys))
	for i := range weights {
		weights[i] = 1
	}
	agg, withScores := "sum", false
	for i := at + 1 + len(keys); i < len(args); i++ {
		left := len(args) - i - 1
		switch {
		case op != opDiff && is(args[i], "weights") && left >= len(keys):
			for j := range keys {
				w, ok := kinds.ParseScore(args[i+1+j])
				if !ok {
					x.Error("ERR weight value is not a float")
					return
				}
				weights[j] = w
			}
			i += len(keys)
		case op != opDiff && is(args[i], "aggregate") && left >= 1:
			a := lowerString(args[i+1])
			if a != "sum" && a != "min" && a != "max" {
				x.Error(errSyntaxText)
				return
			}
			agg = a
			i++
		case !store_ && is(args[i], "withscores"):
			withScores = true
		default:
			x.Error(errSyntaxText)
			return
		}
	}
	srcs, ok := readSources(x, keys)
	if !ok {
		return
	}
	res := zsetAlgebra(op, srcs, weights, agg)
	out := make([]kinds.Element, 0, len(res))
	for m, s := range res {
		out = append(out, kinds.Element{Member: m, Score: s})
	}
	slices.SortFunc(out, func(a, b kinds.Element) int {
		switch {
		case a.Score < b.Score:
			return -1
		case a.Score > b.Score:
			return 1
		}
		return strings.Compare(a.Member, b.Member)
	})
	if !store_ {
		replyElements(x, out, withScores, true)
		return
	}
	dst := args[1]
	if len(out) > kinds.MaxElements {
		x.Error(errTooBig)
		return
	}
	x.Store().Delete(dst, x.NowMs())
	if len(out) > 0 {
		_, err := x.Store().WriteObject(dst, store.KindZSet, x.NowMs(), newZSet, func(o store.Object) bool {
			z := o.(*kinds.ZSet)
			for _, e := range out {
				z.Set(e.Member, e.Score)
			}
			return true
		})
		if err != nil {
			replyStoreErr(x, err)
			return
		}
	}
	x.Int(int64(len(out)))
}

// zsetAlgebra is Redis's zunionInterDiffGenericCommand on copied sources:
// weighted scores (a NaN product is 0), aggregated by sum (a NaN sum is
// 0), min or max; a difference keeps the first set's scores.
func zsetAlgebra(op int, srcs []map[string]float64, weights []float64, agg string) map[string]float64 {
	weighted := func(i int, s float64) float64 {
		v := weights[i] * s
		if math.IsNaN(v) {
			return 0
		}
		return v
	}
	combine := func(acc, v float64) float64 {
		switch agg {
		case "min":
			return math.Min(acc, v)
		case "max":
			return math.Max(acc, v)
		}
		r := acc + v
		if math.IsNaN(r) {
			return 0
		}
		return r
	}
	res := map[string]float64{}
	switch op {
	case opUnion:
		for i, src := range srcs {
			for m, s := range src {
				v := weighted(i, s)
				if acc, ok := res[m]; ok {
					res[m] = combine(acc, v)
				} else {
					res[m] = v
				}
			}
		}
	case opInter:
		for m, s := range srcs[0] {
			acc, in := weighted(0, s), true
			for i := 1; i < len(srcs) && in; i++ {
				var t float64
				if t, in = srcs[i][m]; in {
					acc = combine(acc, weighted(i, t))
				}
			}
			if in {
				res[m] = acc
			}
		}
	case opDiff:
		for m, s := range srcs[0] {
			in := false
			for i := 1; i < len(srcs) && !in; i++ {
				_, in = srcs[i][m]
			}
			if !in {
				res[m] = s
			}
		}
	}
	return res
}

func zintercardCmd(x *server.Ctx) {
	args := x.Args()
	keys, ok := numKeys(x, args, 1)
	if !ok {
		return
	}
	limit := int64(0)
	for i := 2 + len(keys); i < len(args); i++ {
		if is(args[i], "limit") && i+1 < len(args) {
			n, ok := parseInt(args[i+1])
			if !ok || n < 0 {
				x.Error("ERR LIMIT can't be negative")
				return
			}
			limit = n
			i++
			continue
		}
		x.Error(errSyntaxText)
		return
	}
	srcs, ok := readSources(x, keys)
	if !ok {
		return
	}
	n := int64(len(zsetAlgebra(opInter, srcs, make([]float64, len(keys)), "sum")))
	if limit > 0 && n > limit {
		n = limit
	}
	x.Int(n)
}
