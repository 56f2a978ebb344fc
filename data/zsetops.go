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
// lock, one at a time: ZUNION walks every source once, keeping one map
// from member to result element (zsetUnion); ZINTER, ZDIFF and ZINTERCARD
// copy one set's members (the candidates) and look each up in the other
// sources in place (zsetInterDiff). The result
// is sorted without locks and, for the STORE forms, replaces the
// destination whatever it held. The
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
	var out []kinds.Element
	if op == opUnion {
		limit := -1
		if store_ {
			limit = kinds.MaxElements
		}
		if out, ok = zsetUnion(x, keys, weights, agg, limit); !ok {
			return
		}
	} else if out, ok = zsetInterDiff(x, op, keys, weights, agg); !ok {
		return
	}
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

// sortElements sorts out as a sorted set orders its members: by score,
// then member.
func sortElements(out []kinds.Element) {
	slices.SortFunc(out, func(a, b kinds.Element) int {
		switch {
		case a.Score < b.Score:
			return -1
		case a.Score > b.Score:
			return 1
		}
		return strings.Compare(a.Member, b.Member)
	})
}

// zsetCards is each key's cardinality (0 for a missing key), or false
// after replying the error of a key of another kind. O(keys); holds one
// key's lock at a time. The caller's goroutine.
func zsetCards(x *server.Ctx, keys [][]byte) ([]int, bool) {
	card := make([]int, len(keys))
	for i, k := range keys {
		if _, err := x.Store().ReadObject(k, store.KindZSet, x.NowMs(), func(o store.Object) {
			card[i] = o.(*kinds.ZSet).Len()
		}); err != nil {
			replyStoreErr(x, err)
			return nil, false
		}
	}
	return card, true
}

// zsetInterDiff is ZINTER (op opInter) or ZDIFF (opDiff) of the sorted
// sets at keys, sorted, as zsetAlgebra computes them from copies, without
// copying every source into a map: the candidates are the members of
// one set (for an intersection the smallest, for a difference the first),
// copied with their scores in that set's order; then every source is
// read once (an intersection's from the smallest set to the largest, as
// Redis's qsort orders them; a difference's in key order), and each
// candidate still in looked up in it (Score: O(1)), as Redis's
// zunionInterDiffGenericCommand does. An intersection's scores are
// weighted and combined in that order as zsetAlgebra does, and sorted
// once; a difference keeps the first set's
// scores and order, which is already the reply's. Every key is read (a
// source of another kind is WRONGTYPE even when the result is empty). A
// million-member ZINTER or ZDIFF of two sets copied 2M members into maps
// and sorted the result: 1.2-2.0 s of event loop against Redis's
// 0.7-0.9 s. The caller's goroutine; holds one source's lock at a time.
func zsetInterDiff(x *server.Ctx, op int, keys [][]byte, weights []float64, agg string) ([]kinds.Element, bool) {
	// order is the order the sources are read and an intersection's
	// scores combined in: Redis's, from the smallest set to the largest
	// (a stable sort by cardinality), so that a sum rounds as Redis's
	// and inf + -inf meets where it does; a difference's is key order.
	order := make([]int, len(keys))
	for i := range order {
		order[i] = i
	}
	if op == opInter {
		card, ok := zsetCards(x, keys)
		if !ok {
			return nil, false
		}
		slices.SortStableFunc(order, func(a, b int) int { return card[a] - card[b] })
	}
	from := order[0]
	var cand []kinds.Element
	if _, err := x.Store().ReadObject(keys[from], store.KindZSet, x.NowMs(), func(o store.Object) {
		z := o.(*kinds.ZSet)
		cand = make([]kinds.Element, 0, z.Len())
		z.Each(func(m string, s float64) bool {
			// cloned: a compact set's members point into its bytes
			cand = append(cand, kinds.Element{Member: strings.Clone(m), Score: s})
			return true
		})
	}); err != nil {
		replyStoreErr(x, err)
		return nil, false
	}
	for pos, i := range order {
		k := keys[i]
		if op == opDiff && i == 0 {
			continue // the candidates, with their scores
		}
		found, err := x.Store().ReadObject(k, store.KindZSet, x.NowMs(), func(o store.Object) {
			z := o.(*kinds.ZSet)
			kept := cand[:0]
			for _, e := range cand {
				t, in := z.Score(e.Member)
				switch {
				case op == opDiff:
					if in {
						continue
					}
				case !in:
					continue
				case pos == 0:
					e.Score = zWeighted(weights[i], t)
				default:
					// Not zWeighted: Redis checks the product for NaN
					// only for the first set; a NaN here makes a sum 0
					// and is ignored by MIN and MAX (zCombine).
					e.Score = zCombine(agg, e.Score, weights[i]*t)
				}
				kept = append(kept, e)
			}
			clear(cand[len(kept):]) // the members dropped go to the GC
			cand = kept
		})
		if err != nil {
			replyStoreErr(x, err)
			return nil, false
		}
		if !found && op == opInter {
			cand = cand[:0] // a missing key is an empty set
		}
	}
	if op == opInter {
		sortElements(cand)
	}
	return cand, true
}

// zsetUnion is ZUNION of the sorted sets at keys, sorted, as zsetAlgebra
// computes it from copies, without copying every source into a map (as
// it did until session 17): the sources are read one at a time from the smallest to
// the largest (a stable sort by cardinality, Redis's order, which a sum's
// rounding depends on); a member not seen before is cloned once and
// appended to the result with its weighted score, one seen before is
// combined into its result element, found through one map from member to
// result index. The map is made at its final size (the sources' sizes but
// the largest's) and holds the members of every source but the last,
// whose members are only looked up: for two sets, one insert per member of
// the smaller and one lookup per member of the larger. When the result
// passes limit members (limit >= 0) it stops and returns what it has (the
// caller refuses more than limit): a ZUNIONSTORE past kinds.MaxElements
// no longer builds the whole union first. Every key is read (a source of
// another kind is WRONGTYPE even when the result would be too large).
// ZUNIONSTORE of two 1M-member sets (1.03M in the union) held the event
// loop 3.5-3.7 s this way against 1.8-2.4 s now (Redis 3.2-3.5 s, loaded
// machine). The caller's goroutine; holds one source's lock at a time.
func zsetUnion(x *server.Ctx, keys [][]byte, weights []float64, agg string, limit int) ([]kinds.Element, bool) {
	card, ok := zsetCards(x, keys)
	if !ok {
		return nil, false
	}
	order := make([]int, len(keys))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return card[a] - card[b] })
	indexed, total := 0, 0 // the members the map may hold; the most the result may hold
	for pos, i := range order {
		if pos < len(order)-1 {
			indexed += card[i]
		}
		total += card[i]
	}
	if limit >= 0 {
		indexed = min(indexed, limit+1)
		total = min(total, limit+1)
	}
	var at map[string]int
	if len(order) > 1 {
		at = make(map[string]int, indexed)
	}
	out := make([]kinds.Element, 0, total)
	for pos, i := range order {
		if limit >= 0 && len(out) > limit {
			break
		}
		last, w := pos == len(order)-1, weights[i]
		if _, err := x.Store().ReadObject(keys[i], store.KindZSet, x.NowMs(), func(o store.Object) {
			o.(*kinds.ZSet).Each(func(m string, s float64) bool {
				v := zWeighted(w, s)
				if pos > 0 {
					if j, ok := at[m]; ok {
						out[j].Score = zCombine(agg, out[j].Score, v)
						return true
					}
				}
				// cloned: a compact set's members point into its bytes
				m = strings.Clone(m)
				if !last {
					at[m] = len(out)
				}
				out = append(out, kinds.Element{Member: m, Score: v})
				return limit < 0 || len(out) <= limit
			})
		}); err != nil {
			replyStoreErr(x, err)
			return nil, false
		}
	}
	if limit >= 0 && len(out) > limit {
		return out, true // refused by the caller: no sort
	}
	sortElements(out)
	return out, true
}

// zWeighted is a source's score times its weight; a NaN product (0 *
// inf) is 0, as in Redis.
func zWeighted(w, s float64) float64 {
	v := w * s
	if math.IsNaN(v) {
		return 0
	}
	return v
}

// zCombine aggregates v into acc by agg ("sum", "min" or "max"); a NaN
// sum (inf + -inf) is 0, as in Redis.
func zCombine(agg string, acc, v float64) float64 {
	// Redis's comparisons, not math.Min/Max: a tie keeps acc, so that
	// -0 against 0 keeps the first one's sign.
	switch agg {
	case "min":
		if v < acc {
			return v
		}
		return acc
	case "max":
		if v > acc {
			return v
		}
		return acc
	}
	r := acc + v
	if math.IsNaN(r) {
		return 0
	}
	return r
}

// zsetAlgebra is Redis's zunionInterDiffGenericCommand on copied sources:
// weighted scores (a NaN product is 0), aggregated by sum (a NaN sum is
// 0), min or max; a difference keeps the first set's scores.
func zsetAlgebra(op int, srcs []map[string]float64, weights []float64, agg string) map[string]float64 {
	if op != opDiff {
		// Redis combines the sources from the smallest set to the
		// largest (qsort by cardinality): the order a sum's rounding
		// and an inf + -inf depend on.
		order := make([]int, len(srcs))
		for i := range order {
			order[i] = i
		}
		slices.SortStableFunc(order, func(a, b int) int { return len(srcs[a]) - len(srcs[b]) })
		sorted, sw := make([]map[string]float64, len(srcs)), make([]float64, len(srcs))
		for j, i := range order {
			sorted[j], sw[j] = srcs[i], weights[i]
		}
		srcs, weights = sorted, sw
	}
	weighted := func(i int, s float64) float64 { return zWeighted(weights[i], s) }
	combine := func(acc, v float64) float64 { return zCombine(agg, acc, v) }
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
					acc = combine(acc, weights[i]*t) // unchecked product, as Redis's
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
	inter, ok := zsetInterDiff(x, opInter, keys, make([]float64, len(keys)), "sum")
	if !ok {
		return
	}
	n := int64(len(inter))
	if limit > 0 && n > limit {
		n = limit
	}
	x.Int(n)
}
