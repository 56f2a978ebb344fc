package data

import (
	"github.com/celld/celld/kinds"
	"github.com/celld/celld/server"
	"github.com/celld/celld/store"
)

// List commands (Redis 7's, without the blocking ones): LPUSH RPUSH LPUSHX
// RPUSHX LPOP RPOP LRANGE LINDEX LLEN LTRIM LREM LSET LINSERT LPOS LMOVE
// RPOPLPUSH.

func init() {
	const g = "list"
	w := func(name string, arity int, flags, acl, since, summary string, run server.Handler) server.Command {
		return server.Command{Name: name, Arity: arity, Flags: flags, FirstKey: 1, LastKey: 1, Step: 1, ACL: acl, Group: g, Since: since, Summary: summary, Run: run}
	}
	register(
		w("lpush", -3, "write denyoom fast", "write list fast", "1.0.0", "Prepends one or more elements to a list. Creates the key if it doesn't exist.", func(x *server.Ctx) { pushCmd(x, true, true) }),
		w("rpush", -3, "write denyoom fast", "write list fast", "1.0.0", "Appends one or more elements to a list. Creates the key if it doesn't exist.", func(x *server.Ctx) { pushCmd(x, false, true) }),
		w("lpushx", -3, "write denyoom fast", "write list fast", "2.2.0", "Prepends one or more elements to a list only when the list exists.", func(x *server.Ctx) { pushCmd(x, true, false) }),
		w("rpushx", -3, "write denyoom fast", "write list fast", "2.2.0", "Appends an element to a list only when the list exists.", func(x *server.Ctx) { pushCmd(x, false, false) }),
		w("lpop", -2, "write fast", "write list fast", "1.0.0", "Returns the first elements in a list after removing it. Deletes the list if the last element was popped.", func(x *server.Ctx) { popCmd(x, true) }),
		w("rpop", -2, "write fast", "write list fast", "1.0.0", "Returns and removes the last elements of a list. Deletes the list if the last element was popped.", func(x *server.Ctx) { popCmd(x, false) }),
		w("lrange", 4, "readonly", "read list slow", "1.0.0", "Returns a range of elements from a list.", lrangeCmd),
		w("lindex", 3, "readonly", "read list slow", "1.0.0", "Returns an element from a list by its index.", lindexCmd),
		w("llen", 2, "readonly fast", "read list fast", "1.0.0", "Returns the length of a list.", llenCmd),
		w("ltrim", 4, "write", "write list slow", "1.0.0", "Removes elements from both ends a list. Deletes the list if all elements were trimmed.", ltrimCmd),
		w("lrem", 4, "write", "write list slow", "1.0.0", "Removes elements from a list. Deletes the list if the last element was removed.", lremCmd),
		w("lset", 4, "write denyoom", "write list slow", "1.0.0", "Sets the value of an element in a list by its index.", lsetCmd),
		w("linsert", 5, "write denyoom", "write list slow", "2.2.0", "Inserts an element before or after another element in a list.", linsertCmd),
		w("lpos", -3, "readonly", "read list slow", "6.0.6", "Returns the index of matching elements in a list.", lposCmd),
		server.Command{Name: "lmove", Arity: 5, Flags: "write denyoom", FirstKey: 1, LastKey: 2, Step: 1, ACL: "write list slow", Group: g, Since: "6.2.0", Summary: "Returns an element after popping it from one list and pushing it to another. Deletes the list if the last element was moved.", Run: lmoveCmd},
		server.Command{Name: "rpoplpush", Arity: 3, Flags: "write denyoom", FirstKey: 1, LastKey: 2, Step: 1, ACL: "write list slow", Group: g, Since: "1.2.0", Summary: "Returns the last element of a list after removing and pushing it to another list. Deletes the list if the last element was popped.", Run: rpoplpushCmd},
	)
}

func readList(x *server.Ctx, key []byte, fn func(l *kinds.List)) (found, ok bool) {
	found, err := x.Store().ReadObject(key, store.KindList, x.NowMs(), func(o store.Object) { fn(o.(*kinds.List)) })
	if err != nil {
		replyStoreErr(x, err)
		return false, false
	}
	return found, true
}

func writeList(x *server.Ctx, key []byte, create bool, fn func(l *kinds.List) bool) (ran, ok bool) {
	var mk func() store.Object
	if create {
		mk = newList
	}
	ran, err := x.Store().WriteObject(key, store.KindList, x.NowMs(), mk, func(o store.Object) bool { return fn(o.(*kinds.List)) })
	if err != nil {
		replyStoreErr(x, err)
		return false, false
	}
	return ran, true
}

func pushCmd(x *server.Ctx, front, create bool) {
	args := x.Args()
	for _, a := range args[2:] {
		if elemTooBig(a) {
			x.Error(errTooBig)
			return
		}
	}
	n, big := 0, false
	if _, ok := writeList(x, args[1], create, func(l *kinds.List) bool {
		if tooBig(l.Len(), len(args)-2) {
			big = true
			return false
		}
		if l.Len() == 0 && len(args) > 3 {
			total, longest := 0, 0
			for _, a := range args[2:] {
				total, longest = total+len(a), max(longest, len(a))
			}
			l.Presize(len(args)-2, total, longest) // one allocation, not one per size class
		}
		for _, a := range args[2:] {
			l.PushTransient(store.KeyString(a), front) // copied where kept
		}
		n = l.Len()
		return true
	}); !ok {
		return
	}
	if big {
		x.Error(errTooBig)
		return
	}
	x.Int(int64(n))
}

func popCmd(x *server.Ctx, front bool) {
	args := x.Args()
	if len(args) > 3 {
		arityErr(x)
		return
	}
	count, withCount := int64(1), len(args) == 3
	if withCount {
		c, ok := parseInt(args[2])
		if !ok || c < 0 {
			x.Error(errPositive)
			return
		}
		count = c
	}
	found, ok := writeList(x, args[1], false, func(l *kinds.List) bool {
		if !withCount {
			if front {
				x.BulkString(l.PopFront())
			} else {
				x.BulkString(l.PopBack())
			}
			return true
		}
		n := min(int(count), l.Len())
		x.Array(n)
		for i := 0; i < n; i++ {
			if front {
				x.BulkString(l.PopFront())
			} else {
				x.BulkString(l.PopBack())
			}
		}
		return n > 0
	})
	if ok && !found {
		if withCount {
			x.NullArray()
		} else {
			x.Null()
		}
	}
}

func lrangeCmd(x *server.Ctx) {
	args := x.Args()
	start, ok1 := parseInt(args[2])
	stop, ok2 := parseInt(args[3])
	if !ok1 || !ok2 {
		x.Error(errNotInt)
		return
	}
	found, ok := readList(x, args[1], func(l *kinds.List) {
		a, b, nonEmpty := rangeIndexes(start, stop, l.Len())
		if !nonEmpty {
			x.Array(0)
			return
		}
		x.Array(b - a + 1)
		for i := a; i <= b; i++ {
			x.BulkString(l.At(i))
		}
	})
	if ok && !found {
		x.Array(0)
	}
}

func lindexCmd(x *server.Ctx) {
	args := x.Args()
	idx, ok := parseInt(args[2])
	if !ok {
		x.Error(errNotInt)
		return
	}
	replied := false
	found, ok := readList(x, args[1], func(l *kinds.List) {
		i := idx
		if i < 0 {
			i += int64(l.Len())
		}
		if i >= 0 && i < int64(l.Len()) {
			x.BulkString(l.At(int(i)))
			replied = true
		}
	})
	if ok && (!found || !replied) {
		x.Null()
	}
}

func llenCmd(x *server.Ctx) {
	n := 0
	if _, ok := readList(x, x.Args()[1], func(l *kinds.List) { n = l.Len() }); ok {
		x.Int(int64(n))
	}
}

func ltrimCmd(x *server.Ctx) {
	args := x.Args()
	start, ok1 := parseInt(args[2])
	stop, ok2 := parseInt(args[3])
	if !ok1 || !ok2 {
		x.Error(errNotInt)
		return
	}
	if _, ok := writeList(x, args[1], false, func(l *kinds.List) bool {
		n := l.Len()
		a, b, nonEmpty := rangeIndexes(start, stop, n)
		if !nonEmpty {
			l.Clear()
			return true
		}
		if a == 0 && b == n-1 {
			return false
		}
		l.Trim(a, b)
		return true
	}); ok {
		x.OK()
	}
}

func lremCmd(x *server.Ctx) {
	args := x.Args()
	count, ok := parseInt(args[2])
	if !ok {
		x.Error(errNotInt)
		return
	}
	elem := store.KeyString(args[3])
	removed := 0
	if _, ok := writeList(x, args[1], false, func(l *kinds.List) bool {
		n := l.Len()
		switch {
		case count == 0:
			removed = l.Filter(func(_ int, s string) bool { return s != elem })
		case count > 0:
			left := count
			removed = l.Filter(func(_ int, s string) bool {
				if left > 0 && s == elem {
					left--
					return false
				}
				return true
			})
		default:
			// Remove the last -count matches: find the cut-off index first.
			left, from := -count, n
			for i := n - 1; i >= 0 && left > 0; i-- {
				if l.At(i) == elem {
					left--
					from = i
				}
			}
			removed = l.Filter(func(i int, s string) bool { return i < from || s != elem })
		}
		return removed > 0
	}); ok {
		x.Int(int64(removed))
	}
}

func lsetCmd(x *server.Ctx) {
	args := x.Args()
	idx, ok := parseInt(args[2])
	if !ok {
		x.Error(errNotInt)
		return
	}
	if elemTooBig(args[3]) {
		x.Error(errTooBig)
		return
	}
	outOfRange := false
	found, ok := writeList(x, args[1], false, func(l *kinds.List) bool {
		i := idx
		if i < 0 {
			i += int64(l.Len())
		}
		if i < 0 || i >= int64(l.Len()) {
			outOfRange = true
			return false
		}
		l.SetAt(int(i), string(args[3]))
		return true
	})
	switch {
	case !ok:
	case !found:
		x.Error("ERR no such key")
	case outOfRange:
		x.Error("ERR index out of range")
	default:
		x.OK()
	}
}

func linsertCmd(x *server.Ctx) {
	args := x.Args()
	var before bool
	switch {
	case is(args[2], "before"):
		before = true
	case is(args[2], "after"):
	default:
		x.Error(errSyntaxText)
		return
	}
	if elemTooBig(args[4]) {
		x.Error(errTooBig)
		return
	}
	pivot := store.KeyString(args[3])
	result, big := int64(-1), false
	found, ok := writeList(x, args[1], false, func(l *kinds.List) bool {
		for i := 0; i < l.Len(); i++ {
			if l.At(i) == pivot {
				if tooBig(l.Len(), 1) {
					big = true
					return false
				}
				if !before {
					i++
				}
				l.InsertAt(i, string(args[4]))
				result = int64(l.Len())
				return true
			}
		}
		return false
	})
	switch {
	case !ok:
	case !found:
		x.Int(0)
	case big:
		x.Error(errTooBig)
	default:
		x.Int(result)
	}
}

func lposCmd(x *server.Ctx) {
	args := x.Args()
	rank, count, maxlen := int64(1), int64(-1), int64(0)
	for i := 3; i < len(args); i += 2 {
		if i+1 >= len(args) {
			x.Error(errSyntaxText)
			return
		}
		n, ok := parseInt(args[i+1])
		if !ok {
			x.Error(errNotInt)
			return
		}
		switch {
		case is(args[i], "rank"):
			if n == 0 {
				x.Error("ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list")
				return
			}
			if n == -1<<63 {
				x.Error("ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807")
				return
			}
			rank = n
		case is(args[i], "count"):
			if n < 0 {
				x.Error("ERR COUNT can't be negative")
				return
			}
			count = n
		case is(args[i], "maxlen"):
			if n < 0 {
				x.Error("ERR MAXLEN can't be negative")
				return
			}
			maxlen = n
		default:
			x.Error(errSyntaxText)
			return
		}
	}
	elem := store.KeyString(args[2])
	var matches []int
	found, ok := readList(x, args[1], func(l *kinds.List) {
		n := l.Len()
		skip := rank - 1
		if rank < 0 {
			skip = -rank - 1
		}
		want := count
		if want == 0 {
			want = int64(n)
		} else if want < 0 {
			want = 1
		}
		for j := 0; j < n && int64(len(matches)) < want; j++ {
			if maxlen != 0 && int64(j) >= maxlen {
				break
			}
			i := j
			if rank < 0 {
				i = n - 1 - j
			}
			if l.At(i) == elem {
				if skip > 0 {
					skip--
					continue
				}
				matches = append(matches, i)
			}
		}
	})
	if !ok {
		return
	}
	_ = found
	if count < 0 {
		if len(matches) == 0 {
			x.Null()
		} else {
			x.Int(int64(matches[0]))
		}
		return
	}
	x.Array(len(matches))
	for _, m := range matches {
		x.Int(int64(m))
	}
}

func lmoveCmd(x *server.Ctx) {
	args := x.Args()
	var fromLeft, toLeft bool
	switch {
	case is(args[3], "left"):
		fromLeft = true
	case is(args[3], "right"):
	default:
		x.Error(errSyntaxText)
		return
	}
	switch {
	case is(args[4], "left"):
		toLeft = true
	case is(args[4], "right"):
	default:
		x.Error(errSyntaxText)
		return
	}
	moveCmd(x, fromLeft, toLeft)
}

func rpoplpushCmd(x *server.Ctx) { moveCmd(x, false, true) }

// moveCmd pops from args[1] and pushes onto args[2]. Redis's order: a
// missing source answers nil whatever the destination holds, then the
// source's kind, then the destination's, all before anything is popped; a
// source equal to the destination rotates it under one lock.
func moveCmd(x *server.Ctx, fromLeft, toLeft bool) {
	args := x.Args()
	src, dst := args[1], args[2]
	pop := func(l *kinds.List) string {
		if fromLeft {
			return l.PopFront()
		}
		return l.PopBack()
	}
	push := func(l *kinds.List, v string) {
		if toLeft {
			l.PushFront(v)
		} else {
			l.PushBack(v)
		}
	}
	if string(src) == string(dst) {
		var v string
		found, ok := writeList(x, src, false, func(l *kinds.List) bool {
			v = pop(l)
			push(l, v)
			return true
		})
		if ok {
			if found {
				x.BulkString(v)
			} else {
				x.Null()
			}
		}
		return
	}
	if found, ok := readList(x, src, func(*kinds.List) {}); !ok {
		return
	} else if !found {
		x.Null()
		return
	}
	// The destination must be a list or missing, and below the element
	// cap (checked again when pushing: another client may fill it between).
	full := false
	if _, ok := readList(x, dst, func(l *kinds.List) { full = tooBig(l.Len(), 1) }); !ok {
		return
	}
	if full {
		x.Error(errTooBig)
		return
	}
	var v string
	found, ok := writeList(x, src, false, func(l *kinds.List) bool { v = pop(l); return true })
	if !ok {
		return
	}
	if !found {
		x.Null()
		return
	}
	_, err := x.Store().WriteObject(dst, store.KindList, x.NowMs(), newList, func(o store.Object) bool {
		if full = tooBig(o.(*kinds.List).Len(), 1); full {
			return false
		}
		push(o.(*kinds.List), v)
		return true
	})
	if err != nil || full {
		// The destination changed kind, filled up to the cap (or memory
		// ran out) since it was checked: give the element back so that
		// nothing is lost.
		x.Store().WriteObject(src, store.KindList, x.NowMs(), newList, func(o store.Object) bool {
			if fromLeft {
				o.(*kinds.List).PushFront(v)
			} else {
				o.(*kinds.List).PushBack(v)
			}
			return true
		})
		if full {
			x.Error(errTooBig)
		} else {
			replyStoreErr(x, err)
		}
		return
	}
	x.BulkString(v)
}
