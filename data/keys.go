package data

import (
	"errors"
	"math"
	"strconv"

	"github.com/celld/celld/kinds"
	"github.com/celld/celld/server"
	"github.com/celld/celld/store"
)

// The key commands: they work on a key whatever its kind (store.Kind), so
// the kinds added beside strings get them for free.

func init() {
	const (
		ro  = "readonly fast"
		wf  = "write fast"
		kro = "keyspace read fast"
		kwf = "keyspace write fast"
	)
	key := func(name string, arity int, flags, acl, since, summary string, run server.Handler) server.Command {
		return server.Command{Name: name, Arity: arity, Flags: flags, FirstKey: 1, LastKey: 1, Step: 1,
			ACL: acl, Group: "generic", Since: since, Summary: summary, Run: run}
	}
	all := func(c server.Command) server.Command { c.LastKey = -1; return c }
	touch := all(key("touch", -2, ro, kro, "3.2.1", "Returns the number of existing keys out of those specified after updating the time they were last accessed.", cmdTouch))
	touch.KeySpecs = []server.KeySpec{{Flags: "RO", Index: 1, LastKey: -1, KeyStep: 1}}
	touch.Tips = []string{"request_policy:multi_shard", "response_policy:agg_sum"}
	two := func(src, dst string) []server.KeySpec {
		return []server.KeySpec{{Flags: src, Index: 1, KeyStep: 1}, {Flags: dst, Index: 2, KeyStep: 1}}
	}
	objSub := func(name, summary string) server.Command {
		return server.Command{Name: name, Arity: 3, Flags: "readonly", FirstKey: 2, LastKey: 2, Step: 1, ACL: "keyspace read slow",
			Summary: summary, Run: cmdObject, Tips: []string{"nondeterministic_output"},
			KeySpecs: []server.KeySpec{{Flags: "RO", Index: 2, KeyStep: 1}}}
	}
	server.Register(
		all(key("del", -2, "write", "keyspace write slow", "1.0.0", "Deletes one or more keys.", cmdDel)),
		all(key("unlink", -2, wf, kwf, "4.0.0", "Asynchronously deletes one or more keys.", cmdDel)),
		all(key("exists", -2, ro, kro, "1.0.0", "Determines whether one or more keys exist.", cmdExists)),
		touch,
		key("type", 2, ro, kro, "1.0.0", "Determines the type of value stored at a key.", cmdType),
		key("ttl", 2, ro, kro, "1.0.0", "Returns the expiration time in seconds of a key.", cmdTTL),
		key("pttl", 2, ro, kro, "2.6.0", "Returns the expiration time in milliseconds of a key.", cmdPTTL),
		key("expiretime", 2, ro, kro, "7.0.0", "Returns the expiration time of a key as a Unix timestamp.", cmdExpireTime),
		key("pexpiretime", 2, ro, kro, "7.0.0", "Returns the expiration time of a key as a Unix milliseconds timestamp.", cmdPExpireTime),
		key("expire", -3, wf, kwf, "1.0.0", "Sets the expiration time of a key in seconds.", cmdExpire),
		key("pexpire", -3, wf, kwf, "2.6.0", "Sets the expiration time of a key in milliseconds.", cmdPExpire),
		key("expireat", -3, wf, kwf, "1.2.0", "Sets the expiration time of a key to a Unix timestamp.", cmdExpireAt),
		key("pexpireat", -3, wf, kwf, "2.6.0", "Sets the expiration time of a key to a Unix milliseconds timestamp.", cmdPExpireAt),
		key("persist", 2, wf, kwf, "2.2.0", "Removes the expiration time of a key.", cmdPersist),
		server.Command{Name: "rename", Arity: 3, Flags: "write", FirstKey: 1, LastKey: 2, Step: 1, ACL: "keyspace write slow",
			Group: "generic", Since: "1.0.0", Summary: "Renames a key and overwrites the destination.", Run: cmdRename,
			KeySpecs: two("RW access delete", "OW update")},
		server.Command{Name: "renamenx", Arity: 3, Flags: wf, FirstKey: 1, LastKey: 2, Step: 1, ACL: kwf,
			Group: "generic", Since: "1.0.0", Summary: "Renames a key only when the target key name doesn't exist.", Run: cmdRenameNX,
			KeySpecs: two("RW access delete", "OW insert")},
		server.Command{Name: "copy", Arity: -3, Flags: "write denyoom", FirstKey: 1, LastKey: 2, Step: 1, ACL: "keyspace write slow",
			Group: "generic", Since: "6.2.0", Summary: "Copies the value of a key to a new key.", Run: cmdCopy,
			KeySpecs: two("RO access", "OW update")},
		server.Command{Name: "object", Arity: -2, ACL: "slow", Group: "generic", Since: "2.2.3",
			Summary: "A container for object introspection commands.", Subcommands: []server.Command{
				objSub("encoding", "Returns the internal encoding of a Redis object."),
				objSub("freq", "Returns the logarithmic access frequency counter of a Redis object."),
				objSub("idletime", "Returns the time since the last access to a Redis object."),
				objSub("refcount", "Returns the reference count of a value of a key."),
				{Name: "help", Arity: 2, Flags: "loading stale", ACL: "keyspace slow", Summary: "Returns helpful text about the different subcommands.", Run: cmdObject},
			}},
	)
}

func cmdDel(x *server.Ctx) {
	st, nowMs := x.Store(), x.NowMs()
	n := int64(0)
	for _, k := range x.Args()[1:] {
		if st.Delete(k, nowMs) {
			n++
		}
	}
	x.Int(n)
}

// cmdExists counts without touching the keys' LRU clocks (Redis's
// LOOKUP_NOTOUCH); a key named twice counts twice.
func cmdExists(x *server.Ctx) {
	st, nowMs := x.Store(), x.NowMs()
	n := int64(0)
	for _, k := range x.Args()[1:] {
		if _, _, ok := st.Inspect(k, nowMs); ok {
			n++
		}
	}
	x.Int(n)
}

func cmdTouch(x *server.Ctx) {
	st, nowMs := x.Store(), x.NowMs()
	n := int64(0)
	for _, k := range x.Args()[1:] {
		if _, ok := st.Get(k, nowMs); ok {
			n++
		}
	}
	x.Int(n)
}

func cmdType(x *server.Ctx) {
	if v, _, ok := x.Store().Inspect(x.Args()[1], x.NowMs()); ok {
		x.Status(v.Kind.String())
		return
	}
	x.Status("none")
}

// ttlReply implements TTL, PTTL, EXPIRETIME and PEXPIRETIME: -2 for a
// missing key, -1 without TTL; TTL rounds to the nearest second as Redis.
func ttlReply(x *server.Ctx, ms, abs bool) {
	nowMs := x.NowMs()
	v, _, ok := x.Store().Inspect(x.Args()[1], nowMs)
	switch {
	case !ok:
		x.Int(-2)
		return
	case v.ExpireAtMs == 0:
		x.Int(-1)
		return
	}
	t := v.ExpireAtMs
	if !abs {
		t -= nowMs
	}
	if t < 0 {
		t = 0
	}
	if !ms {
		t = (t + 500) / 1000
	}
	x.Int(t)
}

func cmdTTL(x *server.Ctx)         { ttlReply(x, false, false) }
func cmdPTTL(x *server.Ctx)        { ttlReply(x, true, false) }
func cmdExpireTime(x *server.Ctx)  { ttlReply(x, false, true) }
func cmdPExpireTime(x *server.Ctx) { ttlReply(x, true, true) }

// EXPIRE option flags.
const (
	expNX = 1 << iota
	expXX
	expGT
	expLT
)

// expireGeneric implements EXPIRE, PEXPIRE, EXPIREAT and PEXPIREAT as Redis
// 7's expireGenericCommand: options first, then the number, overflow
// checks, then the conditions (GT treats no TTL as infinite); an expiry not
// in the future deletes the key.
func expireGeneric(x *server.Ctx, name string, seconds, absolute bool) {
	args := x.Args()
	flags := 0
	for _, a := range args[3:] {
		switch {
		case eq(a, "nx"):
			flags |= expNX
		case eq(a, "xx"):
			flags |= expXX
		case eq(a, "gt"):
			flags |= expGT
		case eq(a, "lt"):
			flags |= expLT
		default:
			x.Error("ERR Unsupported option " + string(cString(a)))
			return
		}
	}
	if flags&expNX != 0 && flags&(expXX|expGT|expLT) != 0 {
		x.Error("ERR NX and XX, GT or LT options at the same time are not compatible")
		return
	}
	if flags&expGT != 0 && flags&expLT != 0 {
		x.Error("ERR GT and LT options at the same time are not compatible")
		return
	}
	when, ok := kinds.ParseInt(args[2])
	if !ok {
		x.Error(errNotInt)
		return
	}
	if seconds {
		if when > math.MaxInt64/1000 || when < math.MinInt64/1000 {
			x.Error(errExpireTime(name))
			return
		}
		when *= 1000
	}
	nowMs := x.NowMs()
	var base int64
	if !absolute {
		base = nowMs
	}
	if when > math.MaxInt64-base {
		x.Error(errExpireTime(name))
		return
	}
	when += base
	result := int64(0)
	x.Store().Update(args[1], nowMs, func(v store.Value, exists bool) (store.Value, store.Action) {
		if !exists {
			return v, store.Keep
		}
		cur := v.ExpireAtMs
		switch {
		case flags&expNX != 0 && cur != 0,
			flags&expXX != 0 && cur == 0,
			flags&expGT != 0 && (cur == 0 || when <= cur),
			flags&expLT != 0 && cur != 0 && when >= cur:
			return v, store.Keep
		}
		result = 1
		if when <= nowMs {
			return v, store.Delete
		}
		v.ExpireAtMs = when
		return v, store.Put
	})
	x.Int(result)
}

// cString cuts b at its first NUL, as Redis's C-string error texts do.
func cString(b []byte) []byte {
	for i, c := range b {
		if c == 0 {
			return b[:i]
		}
	}
	return b
}

func cmdExpire(x *server.Ctx)    { expireGeneric(x, "expire", true, false) }
func cmdPExpire(x *server.Ctx)   { expireGeneric(x, "pexpire", false, false) }
func cmdExpireAt(x *server.Ctx)  { expireGeneric(x, "expireat", true, true) }
func cmdPExpireAt(x *server.Ctx) { expireGeneric(x, "pexpireat", false, true) }

func cmdPersist(x *server.Ctx) {
	result := int64(0)
	x.Store().Update(x.Args()[1], x.NowMs(), func(v store.Value, exists bool) (store.Value, store.Action) {
		if !exists || v.ExpireAtMs == 0 {
			return v, store.Keep
		}
		result = 1
		v.ExpireAtMs = 0
		return v, store.Put
	})
	x.Int(result)
}

func renameGeneric(x *server.Ctx, nx bool) {
	a := x.Args()
	moved, err := x.Store().Rename(a[1], a[2], x.NowMs(), nx)
	switch {
	case errors.Is(err, store.ErrNoSuchKey):
		x.Error("ERR no such key")
	case err != nil:
		x.StoreError(err)
	case !nx:
		x.OK()
	case moved:
		x.Int(1)
	default:
		x.Int(0)
	}
}

func cmdRename(x *server.Ctx)   { renameGeneric(x, false) }
func cmdRenameNX(x *server.Ctx) { renameGeneric(x, true) }

// cmdCopy is COPY source destination [DB n] [REPLACE], with Redis 7.0's
// errors (db.c copyCommand).
func cmdCopy(x *server.Ctx) {
	a := x.Args()
	replace := false
	db := int64(x.DB())
	for j := 3; j < len(a); j++ {
		switch {
		case eq(a[j], "replace"):
			replace = true
		case eq(a[j], "db") && j+1 < len(a):
			n, ok := kinds.ParseInt(a[j+1])
			if !ok || n < math.MinInt32 || n > math.MaxInt32 {
				x.Error(errNotInt)
				return
			}
			db = n
			j++
		default:
			x.Error(errSyntax)
			return
		}
	}
	if db != int64(x.DB()) && x.Cluster() {
		x.Error("ERR Copying to another database is not allowed in cluster mode")
		return
	}
	dst, ok := x.Database(db)
	if !ok {
		x.Error("ERR DB index is out of range")
		return
	}
	if db == int64(x.DB()) && string(a[1]) == string(a[2]) {
		x.Error("ERR source and destination objects are the same")
		return
	}
	copied, err := store.CopyTo(x.Store(), dst, a[1], a[2], x.NowMs(), replace)
	if copied && db != int64(x.DB()) {
		x.TouchWatched(int(db), a[2]) // the dispatcher touches only the caller's database
	}
	switch {
	case err != nil:
		x.StoreError(err)
	case copied:
		x.Int(1)
	default:
		x.Int(0)
	}
}

const objectHelp = `OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:
ENCODING <key>
    Return the kind of internal representation used in order to store the value
    associated with a <key>.
FREQ <key>
    Return the access frequency index of the <key>. The returned integer is
    proportional to the logarithm of the recent access frequency of the key.
IDLETIME <key>
    Return the idle time of the <key>, that is the approximated number of
    seconds elapsed since the last access to the key.
REFCOUNT <key>
    Return the number of references of the value associated with the specified
    <key>.
HELP
    Prints this help.`

// cmdObject answers OBJECT's subcommands for every kind: ENCODING as Redis
// chooses for a string written by SET (see kinds.Encoding), IDLETIME from
// the LRU clock, FREQ with Redis's refusal (celld has no LFU policy),
// REFCOUNT as Redis's shared integers show it.
func cmdObject(x *server.Ctx) {
	a := x.Args()
	sub := a[1]
	if eq(sub, "help") {
		if len(a) != 2 {
			x.Error("ERR wrong number of arguments for 'object|help' command")
			return
		}
		lines := splitLines(objectHelp)
		x.Array(len(lines))
		for _, l := range lines {
			x.Status(l)
		}
		return
	}
	var name string
	for _, n := range []string{"encoding", "freq", "idletime", "refcount"} {
		if eq(sub, n) {
			name = n
		}
	}
	if name == "" {
		x.Error("ERR unknown subcommand '" + string(cString(sub)) + "'. Try OBJECT HELP.")
		return
	}
	if len(a) != 3 {
		x.Error("ERR wrong number of arguments for 'object|" + name + "' command")
		return
	}
	v, idle, ok := x.Store().Inspect(a[2], x.NowMs())
	if !ok {
		x.Null()
		return
	}
	switch name {
	case "encoding":
		enc := encoding(v)
		x.Store().PeekObject(a[2], x.NowMs(), func(o store.Object) {
			if e, ok := o.(interface{ Encoding() string }); ok {
				enc = e.Encoding() // its form now (compact or not)
			}
		})
		x.BulkString(enc)
	case "idletime":
		x.Int(idle)
	case "freq":
		x.Error("ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.")
	case "refcount":
		if v.Kind == store.KindString && v.Raw == "" && !v.Invalid && v.TAT < 10000 {
			x.Int(math.MaxInt32) // Redis's shared integers 0..9999
			return
		}
		x.Int(1)
	}
}

// encoding is OBJECT ENCODING's answer: for a string, Redis's choice for
// its bytes; for the other kinds, the encoding Redis uses for a large
// value of that kind (objects that can tell their form, kinds' Encoding
// methods, answer for themselves).
func encoding(v store.Value) string {
	switch v.Kind {
	case store.KindString:
		if v.Raw == "" && !v.Invalid {
			if v.TAT <= math.MaxInt64 {
				return "int"
			}
			return "embstr" // 20 digits, above int64
		}
		return kinds.Encoding([]byte(v.Raw))
	case store.KindHash:
		return "hashtable"
	case store.KindList:
		return "quicklist"
	case store.KindZSet:
		return "skiplist"
	}
	return "raw"
}

func splitLines(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

var _ = strconv.Itoa
