// Package data holds the command handlers of the value kinds celld keeps
// beside CL.THROTTLE's TATs: strings and counters, and the key commands
// that work on every kind. It registers them into the server's dispatch
// table from init (server.Register); main imports it for that effect. The
// pure operations live in package kinds; the keys in package store.
//
// Handlers run on the caller's connection (or inside EXEC or a script) and
// reach the caller's database only through Ctx.Store.
package data

import (
	"math"
	"strconv"

	"github.com/celld/celld/kinds"
	"github.com/celld/celld/server"
	"github.com/celld/celld/store"
)

// Redis 7's error texts.
const (
	errNotInt = "ERR value is not an integer or out of range"
	errSyntax = "ERR syntax error"
)

func errExpireTime(name string) string { return "ERR invalid expire time in '" + name + "' command" }

func kindErr(err error) string { return "ERR " + err.Error() }

func init() {
	const (
		ro  = "readonly fast"
		wd  = "write denyoom"
		wdf = "write denyoom fast"
	)
	str := func(name string, arity int, flags, acl, since, summary string, run server.Handler) server.Command {
		return server.Command{Name: name, Arity: arity, Flags: flags, FirstKey: 1, LastKey: 1, Step: 1,
			ACL: acl, Group: "string", Since: since, Summary: summary, Run: run}
	}
	// with gives a command its key spec (one key, at 1).
	with := func(k server.KeySpec, c server.Command) server.Command { c.KeySpecs = []server.KeySpec{k}; return c }
	intValue := func(c server.Command) server.Command { c.IntIsValue = true; return c }
	spec := func(flags string) server.KeySpec { return server.KeySpec{Flags: flags, Index: 1, KeyStep: 1} }
	server.Register(
		str("get", 2, ro, "read string fast", "1.0.0", "Returns the string value of a key.", cmdGet),
		str("set", -3, wd, "write string slow", "1.0.0", "Sets the string value of a key, ignoring its type. The key is created if it doesn't exist.", cmdSet),
		with(spec("OW insert"), str("setnx", 3, wdf, "write string fast", "1.0.0", "Set the string value of a key only when the key doesn't exist.", cmdSetNX)),
		with(spec("OW update"), str("setex", 4, wd, "write string slow", "2.0.0", "Sets the string value and expiration time of a key. Creates the key if it doesn't exist.", cmdSetEX)),
		with(spec("OW update"), str("psetex", 4, wd, "write string slow", "2.6.0", "Sets both string value and expiration time in milliseconds of a key. The key is created if it doesn't exist.", cmdPSetEX)),
		str("getset", 3, wdf, "write string fast", "1.0.0", "Returns the previous string value of a key after setting it to a new value.", cmdGetSet),
		with(spec("RW access delete"), str("getdel", 2, "write fast", "write string fast", "6.2.0", "Returns the string value of a key after deleting the key.", cmdGetDel)),
		with(server.KeySpec{Flags: "RW access update", Notes: "RW and UPDATE because it changes the TTL", Index: 1, KeyStep: 1}, str("getex", -2, "write fast", "write string fast", "6.2.0", "Returns the string value of a key after setting its expiration time.", cmdGetEx)),
		str("strlen", 2, ro, "read string fast", "2.2.0", "Returns the length of a string value.", cmdStrlen),
		intValue(with(spec("RW insert"), str("append", 3, wdf, "write string fast", "2.0.0", "Appends a string to the value of a key. Creates the key if it doesn't exist.", cmdAppend))),
		str("getrange", 4, "readonly", "read string slow", "2.4.0", "Returns a substring of the string stored at a key.", cmdGetRange),
		str("substr", 4, "readonly", "read string slow", "1.0.0", "Returns a substring from a string value.", cmdGetRange),
		intValue(with(spec("RW update"), str("setrange", 4, wd, "write string slow", "2.2.0", "Overwrites a part of a string value with another by an offset. Creates the key if it doesn't exist.", cmdSetRange))),
		intValue(str("incr", 2, wdf, "write string fast", "1.0.0", "Increments the integer value of a key by one. Uses 0 as initial value if the key doesn't exist.", cmdIncr)),
		intValue(str("decr", 2, wdf, "write string fast", "1.0.0", "Decrements the integer value of a key by one. Uses 0 as initial value if the key doesn't exist.", cmdDecr)),
		intValue(str("incrby", 3, wdf, "write string fast", "1.0.0", "Increments the integer value of a key by a number. Uses 0 as initial value if the key doesn't exist.", cmdIncrBy)),
		intValue(str("decrby", 3, wdf, "write string fast", "1.0.0", "Decrements a number from the integer value of a key. Uses 0 as initial value if the key doesn't exist.", cmdDecrBy)),
		str("incrbyfloat", 3, wdf, "write string fast", "2.6.0", "Increment the floating point value of a key by a number. Uses 0 as initial value if the key doesn't exist.", cmdIncrByFloat),
		server.Command{Name: "mget", Arity: -2, Flags: ro, FirstKey: 1, LastKey: -1, Step: 1, ACL: "read string fast",
			Group: "string", Since: "1.0.0", Summary: "Atomically returns the string values of one or more keys.", Run: cmdMGet,
			Tips: []string{"request_policy:multi_shard"}},
		server.Command{Name: "mset", Arity: -3, Flags: wd, FirstKey: 1, LastKey: -1, Step: 2, ACL: "write string slow",
			Group: "string", Since: "1.0.1", Summary: "Atomically creates or modifies the string values of one or more keys.", Run: cmdMSet,
			KeySpecs: []server.KeySpec{{Flags: "OW update", Index: 1, LastKey: -1, KeyStep: 2}},
			Tips:     []string{"request_policy:multi_shard", "response_policy:all_succeeded"}},
		server.Command{Name: "msetnx", Arity: -3, Flags: wd, FirstKey: 1, LastKey: -1, Step: 2, ACL: "write string slow",
			Group: "string", Since: "1.0.1", Summary: "Atomically modifies the string values of one or more keys only when all keys don't exist.", Run: cmdMSetNX,
			KeySpecs: []server.KeySpec{{Flags: "OW insert", Index: 1, LastKey: -1, KeyStep: 2}},
			Tips:     []string{"request_policy:multi_shard", "response_policy:agg_min"}},
	)
}

// cmdGet answers the value without allocating: the store hands back the
// text (or the TAT, formatted into the reply).
func cmdGet(x *server.Ctx) {
	v, ok := x.Store().Get(x.Args()[1], x.NowMs())
	switch {
	case !ok:
		x.Null()
	case v.Kind != store.KindString:
		x.WrongType()
	default:
		x.BulkText(v)
	}
}

// SET option flags, as Redis names them (OBJ_SET_NX, ...).
const (
	setNX = 1 << iota
	setXX
	setGet
	setKeepTTL
	setEX
	setPX
	setEXAT
	setPXAT
	setPersist
	anyExpire = setEX | setPX | setEXAT | setPXAT
)

// parseSetOptions reads SET's options (forGet false) or GETEX's (forGet
// true) from args as Redis 7's parseExtendedStringArgumentsOrReply: the
// flags and the expiry argument, or ok false after a syntax error.
func parseSetOptions(args [][]byte, forGet bool) (flags int, expArg []byte, ok bool) {
	for j := 0; j < len(args); j++ {
		opt := args[j]
		hasNext := j+1 < len(args)
		switch {
		case eq(opt, "nx") && flags&setXX == 0 && !forGet:
			flags |= setNX
		case eq(opt, "xx") && flags&setNX == 0 && !forGet:
			flags |= setXX
		case eq(opt, "get") && !forGet:
			flags |= setGet
		case eq(opt, "keepttl") && flags&(setPersist|anyExpire) == 0 && !forGet:
			flags |= setKeepTTL
		case eq(opt, "persist") && forGet && flags&(anyExpire|setKeepTTL) == 0:
			flags |= setPersist
		case eq(opt, "ex") && flags&(setKeepTTL|setPersist|setEXAT|setPX|setPXAT) == 0 && hasNext:
			flags |= setEX
			j++
			expArg = args[j]
		case eq(opt, "px") && flags&(setKeepTTL|setPersist|setEX|setEXAT|setPXAT) == 0 && hasNext:
			flags |= setPX
			j++
			expArg = args[j]
		case eq(opt, "exat") && flags&(setKeepTTL|setPersist|setEX|setPX|setPXAT) == 0 && hasNext:
			flags |= setEXAT
			j++
			expArg = args[j]
		case eq(opt, "pxat") && flags&(setKeepTTL|setPersist|setEX|setEXAT|setPX) == 0 && hasNext:
			flags |= setPXAT
			j++
			expArg = args[j]
		default:
			return 0, nil, false
		}
	}
	return flags, expArg, true
}

// eq reports whether b equals the lower-case ASCII word w, ignoring case,
// without allocating.
func eq(b []byte, w string) bool {
	if len(b) != len(w) {
		return false
	}
	for i := range b {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != w[i] {
			return false
		}
	}
	return true
}

// expireAt turns an expiry argument into absolute Unix ms as Redis 7's
// getExpireMillisecondsOrReply; on error it replies and returns false.
func expireAt(x *server.Ctx, name string, flags int, arg []byte, nowMs int64) (int64, bool) {
	ms, errText := expireAtText(name, flags, arg, nowMs)
	if errText != "" {
		x.Error(errText)
		return 0, false
	}
	return ms, true
}

// expireAtText is expireAt's arithmetic: the time, or the error's text.
func expireAtText(name string, flags int, arg []byte, nowMs int64) (int64, string) {
	n, ok := kinds.ParseInt(arg)
	if !ok {
		return 0, errNotInt
	}
	seconds := flags&(setEX|setEXAT) != 0
	if n <= 0 || (seconds && n > math.MaxInt64/1000) {
		return 0, errExpireTime(name)
	}
	if seconds {
		n *= 1000
	}
	if flags&(setEX|setPX) != 0 {
		if n > math.MaxInt64-nowMs {
			return 0, errExpireTime(name)
		}
		n += nowMs
	}
	return n, ""
}

// reply kinds of setGeneric's success and abort: SET's (+OK, null) and
// SETNX's (:1, :0).
const (
	replyOKNull = iota
	replyOneZero
)

// setGeneric is Redis 7's setGenericCommand: expiry checks, GET's read
// (WRONGTYPE on another kind, before anything is written), NX/XX, then the
// write; a past EXAT/PXAT deletes the key.
func setGeneric(x *server.Ctx, name string, flags int, key, val, expArg []byte, replies int) {
	nowMs := x.NowMs()
	var exp int64
	if expArg != nil {
		var ok bool
		if exp, ok = expireAt(x, name, flags, expArg, nowMs); !ok {
			return
		}
	}
	nv := store.StringValue(val)
	if flags&setGet == 0 { // the common SET: no old value to read
		cond := store.PutAlways
		switch {
		case flags&setNX != 0:
			cond = store.PutIfAbsent
		case flags&setXX != 0:
			cond = store.PutIfPresent
		}
		nv.ExpireAtMs = exp
		written, err := x.Store().Put(key, nv, nowMs, cond, flags&setKeepTTL != 0)
		switch {
		case err != nil:
			x.StoreError(err)
		case !written && replies == replyOneZero:
			x.Int(0)
		case !written:
			x.Null()
		case replies == replyOneZero:
			x.Int(1)
		default:
			x.OK()
		}
		return
	}
	var old store.Value
	var found, written, wrong bool
	err := x.Store().Update(key, nowMs, func(o store.Value, exists bool) (store.Value, store.Action) {
		old, found = o, exists
		if flags&setGet != 0 && exists && o.Kind != store.KindString {
			wrong = true
			return o, store.Keep
		}
		if (flags&setNX != 0 && exists) || (flags&setXX != 0 && !exists) {
			return o, store.Keep
		}
		written = true
		nv.ExpireAtMs = exp
		if flags&setKeepTTL != 0 && exists {
			nv.ExpireAtMs = o.ExpireAtMs
		}
		return nv, store.Put
	})
	switch {
	case wrong:
		x.WrongType()
	case err != nil:
		x.StoreError(err)
	case flags&setGet != 0 && found:
		x.BulkText(old)
	case flags&setGet != 0:
		x.Null()
	case !written && replies == replyOneZero:
		x.Int(0)
	case !written:
		x.Null()
	case replies == replyOneZero:
		x.Int(1)
	default:
		x.OK()
	}
}

func cmdSet(x *server.Ctx) {
	a := x.Args()
	flags, expArg, ok := parseSetOptions(a[3:], false)
	if !ok {
		x.Error(errSyntax)
		return
	}
	setGeneric(x, "set", flags, a[1], a[2], expArg, replyOKNull)
}

func cmdSetNX(x *server.Ctx) {
	a := x.Args()
	setGeneric(x, "setnx", setNX, a[1], a[2], nil, replyOneZero)
}

func cmdSetEX(x *server.Ctx) {
	a := x.Args()
	setGeneric(x, "setex", setEX, a[1], a[3], a[2], replyOKNull)
}

func cmdPSetEX(x *server.Ctx) {
	a := x.Args()
	setGeneric(x, "psetex", setPX, a[1], a[3], a[2], replyOKNull)
}

// cmdGetSet is GET then SET without options (the TTL is removed).
func cmdGetSet(x *server.Ctx) {
	a := x.Args()
	setGeneric(x, "getset", setGet, a[1], a[2], nil, replyOKNull)
}

func cmdGetDel(x *server.Ctx) {
	var old store.Value
	var found bool
	x.Store().Update(x.Args()[1], x.NowMs(), func(o store.Value, exists bool) (store.Value, store.Action) {
		old, found = o, exists
		if !exists || o.Kind != store.KindString {
			return o, store.Keep
		}
		return o, store.Delete
	})
	switch {
	case !found:
		x.Null()
	case old.Kind != store.KindString:
		x.WrongType()
	default:
		x.BulkText(old)
	}
}

// cmdGetEx is Redis 7's getexCommand: options, then the lookup (a
// missing key answers nil before the expiry is even read), WRONGTYPE, then
// the expiry's checks; a past EXAT/PXAT deletes the key after the reply's
// value is taken.
func cmdGetEx(x *server.Ctx) {
	a := x.Args()
	flags, expArg, ok := parseSetOptions(a[2:], true)
	if !ok {
		x.Error(errSyntax)
		return
	}
	nowMs := x.NowMs()
	var old store.Value
	var found bool
	var errText string
	x.Store().Update(a[1], nowMs, func(o store.Value, exists bool) (store.Value, store.Action) {
		old, found = o, exists
		switch {
		case !exists || o.Kind != store.KindString:
			return o, store.Keep
		case expArg != nil: // a past time deletes (Update's rule)
			exp, e := expireAtText("getex", flags, expArg, nowMs)
			if e != "" {
				errText = e
				return o, store.Keep
			}
			o.ExpireAtMs = exp
			return o, store.Put
		case flags&setPersist != 0 && o.ExpireAtMs != 0:
			o.ExpireAtMs = 0
			return o, store.Put
		}
		return o, store.Keep
	})
	switch {
	case !found:
		x.Null()
	case old.Kind != store.KindString:
		x.WrongType()
	case errText != "":
		x.Error(errText)
	default:
		x.BulkText(old)
	}
}

// cmdStrlen peeks (store.PeekString): reading a length does not hand the
// text out, so a grown string stays writable in place.
func cmdStrlen(x *server.Ctx) {
	var n int
	kind, ok := x.Store().PeekString(x.Args()[1], x.NowMs(), func(v store.Value) { n = v.TextLen() })
	switch {
	case !ok:
		x.Int(0)
	case kind != store.KindString:
		x.WrongType()
	default:
		x.Int(int64(n))
	}
}

func cmdMGet(x *server.Ctx) {
	keys := x.Args()[1:]
	x.Array(len(keys))
	x.Store().GetMany(keys, x.NowMs(), func(_ int, v store.Value, ok bool) {
		if ok && v.Kind == store.KindString {
			x.BulkText(v)
		} else {
			x.Null()
		}
	})
}

func msetGeneric(x *server.Ctx, nx bool) {
	a := x.Args()
	if len(a)%2 == 0 {
		x.Error("ERR wrong number of arguments for '" + string(lower(a[0])) + "' command")
		return
	}
	n := (len(a) - 1) / 2
	keys := make([][]byte, n)
	vals := make([]store.Value, n)
	for i := 0; i < n; i++ {
		keys[i] = a[1+2*i]
		vals[i] = store.StringValue(a[2+2*i])
	}
	set, err := x.Store().SetMany(keys, vals, x.NowMs(), nx)
	switch {
	case err != nil:
		x.StoreError(err)
	case !nx:
		x.OK()
	case set:
		x.Int(1)
	default:
		x.Int(0)
	}
}

func lower(b []byte) []byte {
	out := make([]byte, len(b))
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		out[i] = c
	}
	return out
}

func cmdMSet(x *server.Ctx)   { msetGeneric(x, false) }
func cmdMSetNX(x *server.Ctx) { msetGeneric(x, true) }

// text is a string value's bytes (a fresh slice for a TAT).
func text(v store.Value) []byte {
	if v.Raw != "" || v.Invalid {
		return []byte(v.Raw)
	}
	return strconv.AppendUint(nil, v.TAT, 10)
}

// cmdAppend writes the argument at the end of a long text in place
// (store.EditString: O(argument) amortized); a short or numeric value, a
// missing key, another kind or an over-long result take the general path,
// which builds the new string from the old and the argument.
func cmdAppend(x *server.Ctx) {
	a := x.Args()
	if n, done := x.Store().EditString(a[1], x.NowMs(), -1, len(a[2]), x.MaxBulk(), func(r []byte) { copy(r, a[2]) }); done {
		x.Int(n)
		return
	}
	var n int64
	var errText string
	err := x.Store().Update(a[1], x.NowMs(), func(o store.Value, exists bool) (store.Value, store.Action) {
		if !exists {
			n = int64(len(a[2]))
			return store.StringValue(a[2]), store.Put
		}
		if o.Kind != store.KindString {
			errText = server.ErrWrongTypeText
			return o, store.Keep
		}
		olen := int64(o.TextLen())
		if err := kinds.CheckLength(olen, int64(len(a[2])), x.MaxBulk()); err != nil {
			errText = kindErr(err)
			return o, store.Keep
		}
		n = olen + int64(len(a[2]))
		if len(a[2]) == 0 {
			return o, store.Keep
		}
		buf := make([]byte, 0, n)
		buf = o.AppendText(buf)
		buf = append(buf, a[2]...)
		nv := store.StringValueOf(unsafeString(buf))
		nv.ExpireAtMs = o.ExpireAtMs
		return nv, store.Put
	})
	replyInt(x, errText, err, n)
}

func cmdGetRange(x *server.Ctx) {
	a := x.Args()
	start, ok1 := kinds.ParseInt(a[2])
	end, ok2 := kinds.ParseInt(a[3])
	if !ok1 || !ok2 {
		x.Error(errNotInt)
		return
	}
	// Peeked, not got: the range is copied into the reply under the lock
	// (as MGET's replies are), so a grown string is not handed out (it
	// stays writable in place).
	kind, ok := x.Store().PeekString(a[1], x.NowMs(), func(v store.Value) {
		if v.Raw != "" || v.Invalid {
			lo, hi := kinds.GetRange(start, end, len(v.Raw))
			x.BulkString(v.Raw[lo:hi])
			return
		}
		var buf [20]byte
		t := strconv.AppendUint(buf[:0], v.TAT, 10)
		lo, hi := kinds.GetRange(start, end, len(t))
		x.Bulk(t[lo:hi])
	})
	switch {
	case !ok:
		x.BulkString("")
	case kind != store.KindString:
		x.WrongType()
	}
}

func cmdSetRange(x *server.Ctx) {
	a := x.Args()
	off, ok := kinds.ParseInt(a[2])
	if !ok {
		x.Error(errNotInt)
		return
	}
	if off < 0 {
		x.Error(kindErr(kinds.ErrOffset))
		return
	}
	val := a[3]
	if off <= x.MaxBulk() { // in place on a long text (store.EditString), else below
		if n, done := x.Store().EditString(a[1], x.NowMs(), off, len(val), x.MaxBulk(), func(r []byte) { copy(r, val) }); done {
			x.Int(n)
			return
		}
	}
	var n int64
	var errText string
	err := x.Store().Update(a[1], x.NowMs(), func(o store.Value, exists bool) (store.Value, store.Action) {
		var old []byte
		switch {
		case !exists && len(val) == 0:
			n = 0
			return o, store.Keep
		case exists && o.Kind != store.KindString:
			errText = server.ErrWrongTypeText
			return o, store.Keep
		case exists:
			n = int64(o.TextLen())
			if len(val) == 0 {
				return o, store.Keep
			}
			old = text(o)
		}
		if err := kinds.CheckLength(off, int64(len(val)), x.MaxBulk()); err != nil {
			errText = kindErr(err)
			return o, store.Keep
		}
		buf := kinds.SetRange(old, int(off), val)
		n = int64(len(buf))
		nv := store.StringValueOf(unsafeString(buf))
		nv.ExpireAtMs = o.ExpireAtMs
		return nv, store.Put
	})
	replyInt(x, errText, err, n)
}

// incrBy is INCR, DECR, INCRBY and DECRBY on the stored integer (Redis's
// incrDecrCommand): WRONGTYPE, then the stored text read by string2ll,
// then the overflow check; the TTL stays. A non-negative result is stored
// as a number (no allocation), a negative one as its text.
func incrBy(x *server.Ctx, delta int64) {
	var result int64
	var errText string
	err := x.Store().Update(x.Args()[1], x.NowMs(), func(o store.Value, exists bool) (store.Value, store.Action) {
		var cur int64
		switch {
		case !exists:
		case o.Kind != store.KindString:
			errText = server.ErrWrongTypeText
			return o, store.Keep
		case o.Raw == "" && !o.Invalid && o.TAT <= math.MaxInt64:
			cur = int64(o.TAT)
		default:
			var ok bool
			if cur, ok = kinds.ParseInt(text(o)); !ok {
				errText = errNotInt
				return o, store.Keep
			}
		}
		n, err := kinds.AddInt(cur, delta)
		if err != nil {
			errText = kindErr(err)
			return o, store.Keep
		}
		result = n
		nv := store.Value{TAT: uint64(n), ExpireAtMs: o.ExpireAtMs}
		if n < 0 {
			nv = store.Value{Raw: strconv.FormatInt(n, 10), Invalid: true, ExpireAtMs: o.ExpireAtMs}
		}
		return nv, store.Put
	})
	replyInt(x, errText, err, result)
}

func cmdIncr(x *server.Ctx) { incrBy(x, 1) }
func cmdDecr(x *server.Ctx) { incrBy(x, -1) }

func cmdIncrBy(x *server.Ctx) {
	d, ok := kinds.ParseInt(x.Args()[2])
	if !ok {
		x.Error(errNotInt)
		return
	}
	incrBy(x, d)
}

func cmdDecrBy(x *server.Ctx) {
	d, ok := kinds.ParseInt(x.Args()[2])
	if !ok {
		x.Error(errNotInt)
		return
	}
	d, err := kinds.NegateDecrement(d)
	if err != nil {
		x.Error(kindErr(err))
		return
	}
	incrBy(x, d)
}

// cmdIncrByFloat computes in long double as Redis does (kinds.IncrByFloat)
// and stores the reply's text; the TTL stays.
func cmdIncrByFloat(x *server.Ctx) {
	a := x.Args()
	var result string
	var errText string
	err := x.Store().Update(a[1], x.NowMs(), func(o store.Value, exists bool) (store.Value, store.Action) {
		var cur []byte
		if exists {
			if o.Kind != store.KindString {
				errText = server.ErrWrongTypeText
				return o, store.Keep
			}
			cur = text(o)
		}
		s, err := kinds.IncrByFloat(cur, a[2])
		if err != nil {
			errText = kindErr(err)
			return o, store.Keep
		}
		result = s
		nv := store.StringValueOf(s)
		nv.ExpireAtMs = o.ExpireAtMs
		return nv, store.Put
	})
	switch {
	case errText != "":
		x.Error(errText)
	case err != nil:
		x.StoreError(err)
	default:
		x.BulkString(result)
	}
}

// replyInt answers an Update-based command that replies an integer: the
// error its callback chose (errText), else the store's error, else n.
func replyInt(x *server.Ctx, errText string, err error, n int64) {
	switch {
	case errText != "":
		x.Error(errText)
	case err != nil:
		x.StoreError(err)
	default:
		x.Int(n)
	}
}
