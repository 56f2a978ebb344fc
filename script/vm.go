package script

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"time"

	lua "github.com/yuin/gopher-lua"
)

// vm is one pooled Lua state with its sandbox and its Host. It is used by
// one script at a time.
//
// The sandbox follows Redis 7: the libraries are base, table, string and
// math (no io, os, package, debug; no cjson, cmsgpack, bit, struct), and the
// globals are read-only: assigning a global fails with "Attempt to modify a
// readonly table", reading an undefined one fails with "Script attempted to
// access nonexistent global variable". Scripts see:
//
//	env      the script's global table: only KEYS and ARGV, refreshed per
//	         run; its metatable sends reads to builtins and refuses writes.
//	builtins the allowed base functions and the library tables, each a
//	         read-only proxy (an empty table whose metatable forwards reads).
//
// Since states are reused, nothing a script does may outlive its run: the
// shared tables are proxies with protected metatables, rawset and
// table.insert/remove/sort refuse them, setmetatable takes tables only,
// and each run resets the thread's and the function's environment.
type vm struct {
	e    *Engine
	L    *lua.LState
	host Host
	ctx  *deadline

	env       *lua.LTable
	protected map[*lua.LTable]bool
	handler   *lua.LFunction

	// Reused between runs while no script has made them anything but
	// plain arrays (see fill).
	keys, argv *lua.LTable
	// The last script's function, reused when the same script runs again.
	lastProto *lua.FunctionProto
	lastFn    *lua.LFunction

	// Per run.
	flags       CallFlags           // ReadOnly, RESP3 (redis.setresp)
	scriptRESP3 bool                // redis.setresp(3) was called
	callerRESP3 bool                // the EVAL caller speaks RESP3
	flush       func([]byte) []byte // Options.Flush
	broken      bool                // do not pool again

	// The error handler's findings for the failing run.
	errSet    bool
	errMsg    string
	errSource string
	errLine   int

	// Scratch for redis.call arguments, reused across calls.
	buf  []byte
	ends []int
	args [][]byte

	// Interned short strings (KEYS, ARGV and reply strings repeat a lot)
	// and boxed numbers.
	intern map[string]lua.LValue
	nums   [64]struct {
		n int64
		v lua.LValue
	}
}

const (
	maxInterned    = 1024
	maxInternedLen = 64
	// maxArgBuf is the argument scratch kept between calls.
	maxArgBuf = 1 << 20
	// maxStringRep bounds string.rep's result, like Redis's proto-max-bulk-len.
	maxStringRep = 512 << 20
)

const (
	errReadonlyTable = "Attempt to modify a readonly table"
)

func newVM(e *Engine) *vm {
	L := lua.NewState(lua.Options{
		SkipOpenLibs:     true,
		CallStackSize:    1000,
		RegistrySize:     1024 * 4,
		RegistryMaxSize:  1024 * 1024,
		RegistryGrowStep: 1024,
	})
	v := &vm{
		e:         e,
		L:         L,
		host:      e.cfg.NewHost(),
		ctx:       &deadline{},
		protected: make(map[*lua.LTable]bool),
		intern:    make(map[string]lua.LValue),
	}
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{
		{lua.BaseLibName, lua.OpenBase},
		{lua.TabLibName, lua.OpenTable},
		{lua.StringLibName, lua.OpenString},
		{lua.MathLibName, lua.OpenMath},
	} {
		L.Push(L.NewFunction(lib.open))
		L.Push(lua.LString(lib.name))
		L.Call(1, 0)
	}
	orig := L.G.Global
	v.installLua51(orig)

	builtins := L.NewTable()
	for _, name := range []string{
		"assert", "error", "getfenv", "ipairs", "load", "loadstring", "next",
		"pairs", "rawequal", "rawget", "select", "setfenv", "tonumber",
		"tostring", "type", "unpack", "xpcall", "_VERSION",
	} {
		builtins.RawSetString(name, orig.RawGetString(name))
	}
	origRawset := orig.RawGetString("rawset").(*lua.LFunction).GFunction
	origSetmt := orig.RawGetString("setmetatable").(*lua.LFunction).GFunction
	builtins.RawSetString("rawset", L.NewFunction(func(L *lua.LState) int {
		if v.protected[checkTable(L, 1)] {
			L.RaiseError(errReadonlyTable)
		}
		return origRawset(L)
	}))
	builtins.RawSetString("setmetatable", L.NewFunction(func(L *lua.LState) int {
		checkTable(L, 1) // Lua 5.1: tables only (gopher-lua would set the shared metatable of a basic type)
		return origSetmt(L)
	}))
	var strMeta lua.LValue // getmetatable(s) for a string: set below
	builtins.RawSetString("getmetatable", L.NewFunction(checked(func(L *lua.LState) int {
		if _, ok := L.Get(1).(lua.LString); ok {
			L.Push(strMeta)
			return 1
		}
		return luaGetMetatable(L)
	}, argAny)))
	builtins.RawSetString("pcall", L.NewFunction(v.pcall))
	zero := L.NewFunction(func(L *lua.LState) int { L.Push(lua.LNumber(0)); return 1 })
	builtins.RawSetString("collectgarbage", zero) // not runtime.GC: one script must not stop the world
	builtins.RawSetString("gcinfo", zero)

	// table.insert/remove/sort write into their argument: refuse the
	// protected tables, as rawset does.
	tbl := orig.RawGetString("table").(*lua.LTable)
	for _, name := range []string{"insert", "remove", "sort"} {
		fn := tbl.RawGetString(name).(*lua.LFunction).GFunction
		tbl.RawSetString(name, L.NewFunction(func(L *lua.LState) int {
			if t, ok := L.Get(1).(*lua.LTable); ok && v.protected[t] {
				L.RaiseError(errReadonlyTable)
			}
			return fn(L)
		}))
	}

	str := orig.RawGetString("string").(*lua.LTable)
	// gopher-lua's string metatable was the string library itself; hide it
	// (the one in use is installLua51's).
	str.RawSetString("__metatable", lua.LFalse)
	for _, name := range []string{"string", "table", "math"} {
		builtins.RawSetString(name, v.proxy(orig.RawGetString(name).(*lua.LTable)))
	}
	// Scripts see the string metatable as Redis shows it: a read-only
	// table whose __index is string.
	view := L.NewTable()
	view.RawSetString("__index", builtins.RawGetString("string"))
	strMeta = v.proxy(view)
	builtins.RawSetString("redis", v.proxy(v.redisLib()))

	v.env = L.NewTable()
	v.keys, v.argv = L.NewTable(), L.NewTable()
	v.env.RawSetString("KEYS", v.keys)
	v.env.RawSetString("ARGV", v.argv)
	builtins.RawSetString("_G", v.env)
	L.SetMetatable(builtins, v.readonlyMeta(L.NewFunction(luaNoGlobal)))
	L.SetMetatable(v.env, v.readonlyMeta(builtins))
	v.protected[v.env] = true
	v.protected[builtins] = true

	// Functions created from now on (scripts, loadstring) see env, and so
	// does getfenv on Go functions.
	L.Env = v.env
	L.G.Global = v.env
	L.SetContext(v.ctx)
	v.handler = L.NewFunction(v.onError)
	return v
}

// readonlyMeta returns a protected metatable whose reads go to index and
// whose writes fail.
func (v *vm) readonlyMeta(index lua.LValue) *lua.LTable {
	L := v.L
	mt := L.NewTable()
	mt.RawSetString("__index", index)
	mt.RawSetString("__newindex", L.NewFunction(luaReadonly))
	mt.RawSetString("__metatable", lua.LFalse)
	return mt
}

// proxy returns a read-only view of t.
func (v *vm) proxy(t *lua.LTable) *lua.LTable {
	p := v.L.NewTable()
	v.L.SetMetatable(p, v.readonlyMeta(t))
	v.protected[p] = true
	return p
}

func luaReadonly(L *lua.LState) int {
	L.RaiseError(errReadonlyTable)
	return 0
}

func luaNoGlobal(L *lua.LState) int {
	L.RaiseError("Script attempted to access nonexistent global variable '%s'", L.Get(2).String())
	return 0
}

// luaGetMetatable is Lua 5.1's getmetatable, which honours __metatable
// (gopher-lua's does not).
func luaGetMetatable(L *lua.LState) int {
	mt := L.GetMetatable(L.CheckAny(1))
	if t, ok := mt.(*lua.LTable); ok {
		if p := t.RawGetString("__metatable"); p != lua.LNil {
			L.Push(p)
			return 1
		}
	}
	L.Push(mt)
	return 1
}

// pcall is Redis 7's pcall: an error raised as a table with an err field
// (redis.call's errors) comes back as that field's string.
func (v *vm) pcall(L *lua.LState) int {
	fn := L.CheckAny(1)
	if fn.Type() != lua.LTFunction && L.GetMetaField(fn, "__call").Type() != lua.LTFunction {
		L.Push(lua.LFalse)
		L.Push(lua.LString("attempt to call a " + fn.Type().String() + " value"))
		return 2
	}
	if err := L.PCall(L.GetTop()-1, lua.MultRet, nil); err != nil {
		var obj lua.LValue = lua.LString(err.Error())
		var ae *lua.ApiError
		if errors.As(err, &ae) {
			obj = ae.Object
			if ae.Type == lua.ApiErrorPanic {
				v.broken = true // a Go panic: do not trust this state again
			}
		}
		if t, ok := obj.(*lua.LTable); ok {
			if s, ok := t.RawGetString("err").(lua.LString); ok {
				obj = s
			}
		}
		L.Push(lua.LFalse)
		L.Push(obj)
		return 2
	}
	L.Insert(lua.LTrue, 1)
	return L.GetTop()
}

// redisLib builds the redis table.
func (v *vm) redisLib() *lua.LTable {
	L := v.L
	t := L.NewTable()
	fns := map[string]lua.LGFunction{
		"call":               func(L *lua.LState) int { return v.command(L, true) },
		"pcall":              func(L *lua.LState) int { return v.command(L, false) },
		"sha1hex":            luaSHA1Hex,
		"error_reply":        luaErrorReply,
		"status_reply":       luaStatusReply,
		"log":                v.log,
		"setresp":            v.setResp,
		"set_repl":           luaSetRepl,
		"replicate_commands": func(L *lua.LState) int { L.Push(lua.LTrue); return 1 },
		"breakpoint":         func(L *lua.LState) int { L.Push(lua.LFalse); return 1 },
		"debug":              func(L *lua.LState) int { return 0 },
	}
	for name, fn := range fns {
		t.RawSetString(name, L.NewFunction(fn))
	}
	for name, n := range map[string]int{
		"LOG_DEBUG": 0, "LOG_VERBOSE": 1, "LOG_NOTICE": 2, "LOG_WARNING": 3,
		"REPL_NONE": 0, "REPL_AOF": 1, "REPL_SLAVE": 2, "REPL_REPLICA": 2, "REPL_ALL": 3,
	} {
		t.RawSetString(name, lua.LNumber(n))
	}
	t.RawSetString("REDIS_VERSION", lua.LString(v.e.cfg.RedisVersion))
	t.RawSetString("REDIS_VERSION_NUM", lua.LNumber(versionNum(v.e.cfg.RedisVersion)))
	return t
}

// versionNum is Redis's REDIS_VERSION_NUM: 0x00MMmmpp.
func versionNum(s string) int {
	n := 0
	for i, part := range strings.SplitN(s, ".", 3) {
		x, _ := strconv.Atoi(part)
		n |= (x & 0xff) << (16 - 8*i)
	}
	return n
}

// raise raises a Redis error table ({err = "ERR msg"}) as redis.call does.
func raise(L *lua.LState, msg string) int {
	L.Error(errorTable(L, msg), 0)
	return 0
}

// command is redis.call (raiseErr) and redis.pcall.
func (v *vm) command(L *lua.LState, raiseErr bool) int {
	n := L.GetTop()
	if n == 0 {
		return v.fail(L, raiseErr, "Please specify at least one argument for this redis lib call")
	}
	v.buf, v.ends = v.buf[:0], v.ends[:0]
	for i := 1; i <= n; i++ {
		switch a := L.Get(i).(type) {
		case lua.LString:
			v.buf = append(v.buf, a...)
		case lua.LNumber:
			v.buf = appendFloat17(v.buf, float64(a))
		default:
			return v.fail(L, raiseErr, "Lua redis lib command arguments must be strings or integers")
		}
		v.ends = append(v.ends, len(v.buf))
	}
	v.args = v.args[:0]
	start := 0
	for _, end := range v.ends {
		v.args = append(v.args, v.buf[start:end:end])
		start = end
	}
	reply := v.host.Call(v.args, v.flags)
	clear(v.args) // the host must not keep them; neither do we
	if cap(v.buf) > maxArgBuf {
		v.buf = nil
	}
	if resultsWanted(L) == 0 && plainReply(reply) {
		return 0 // a statement call of a status or integer reply (frame.go)
	}
	val, isErr := v.parseReply(reply)
	if isErr && raiseErr {
		L.Error(val, 0)
	}
	L.Push(val)
	return 1
}

func (v *vm) fail(L *lua.LState, raiseErr bool, msg string) int {
	t := errorTable(L, msg)
	if raiseErr {
		L.Error(t, 0)
	}
	L.Push(t)
	return 1
}

// str returns b as a Lua string, interning short ones.
func (v *vm) str(b []byte) lua.LValue {
	if len(b) > maxInternedLen {
		return lua.LString(b)
	}
	if s, ok := v.intern[string(b)]; ok {
		return s
	}
	if len(v.intern) >= maxInterned {
		clear(v.intern)
	}
	s := lua.LValue(lua.LString(b))
	v.intern[string(b)] = s
	return s
}

// maxReusedArray bounds the KEYS/ARGV tables kept between runs.
const maxReusedArray = 64

// fill returns t, or a new table when t is no longer a plain array (a
// script gave it a metatable or string keys, or it grew large), holding
// items as Lua strings. Reusing the tables saves four allocations a run;
// no script can keep a reference to them past its run (globals are
// read-only), so reuse is invisible.
func (v *vm) fill(t *lua.LTable, items [][]byte) *lua.LTable {
	old := t.MaxN()
	if t.Metatable != lua.LNil || old > maxReusedArray || !hashEmpty(t, old) {
		t, old = v.L.CreateTable(len(items), 0), 0
	}
	for i, it := range items {
		if cur, ok := t.RawGetInt(i + 1).(lua.LString); ok && string(cur) == string(it) {
			continue // same argument as last run (ARGV usually is)
		}
		t.RawSetInt(i+1, v.str(it))
	}
	for i := len(items) + 1; i <= old; i++ {
		t.RawSetInt(i, lua.LNil)
	}
	return t
}

// hashEmpty reports whether t has no keys but 1..maxN.
func hashEmpty(t *lua.LTable, maxN int) bool {
	var k lua.LValue = lua.LNil
	if maxN > 0 {
		k = lua.LNumber(maxN)
	}
	k, _ = t.Next(k)
	return k == lua.LNil
}

func luaSHA1Hex(L *lua.LState) int {
	if L.GetTop() != 1 {
		return raise(L, "wrong number of arguments")
	}
	var s string
	switch a := L.Get(1).(type) {
	case lua.LString:
		s = string(a)
	case lua.LNumber:
		s = luaNumberString(float64(a))
	}
	L.Push(lua.LString(SHA1Hex([]byte(s))))
	return 1
}

func luaErrorReply(L *lua.LState) int {
	s, ok := L.Get(-1).(lua.LString)
	if L.GetTop() != 1 || !ok {
		L.Push(errorTable(L, "wrong number or type of arguments"))
		return 1
	}
	msg := string(s)
	if !strings.HasPrefix(msg, "-") {
		msg = "-" + msg
	}
	L.Push(errorTable(L, msg))
	return 1
}

func luaStatusReply(L *lua.LState) int {
	s, ok := L.Get(-1).(lua.LString)
	if L.GetTop() != 1 || !ok {
		L.Push(errorTable(L, "wrong number or type of arguments"))
		return 1
	}
	t := L.CreateTable(0, 1)
	t.RawSetString("ok", s)
	L.Push(t)
	return 1
}

// log is redis.log(level, ...): the arguments joined by spaces, logged at
// debug (LOG_DEBUG, LOG_VERBOSE), info (LOG_NOTICE) or warn (LOG_WARNING).
func (v *vm) log(L *lua.LState) int {
	n := L.GetTop()
	if n < 2 {
		return raise(L, "redis.log() requires two arguments or more.")
	}
	lv, ok := toNumber(L.Get(1))
	if !ok {
		return raise(L, "First argument must be a number (log level).")
	}
	level := int(lv)
	if level < 0 || level > 3 {
		return raise(L, "Invalid debug level.")
	}
	var b strings.Builder
	for i := 2; i <= n; i++ {
		if i != 2 {
			b.WriteByte(' ')
		}
		switch a := L.Get(i).(type) {
		case lua.LString:
			b.WriteString(string(a))
		case lua.LNumber:
			b.WriteString(luaNumberString(float64(a)))
		}
	}
	slevel := [...]slog.Level{slog.LevelDebug, slog.LevelDebug, slog.LevelInfo, slog.LevelWarn}[level]
	v.e.cfg.Logger.Log(context.Background(), slevel, b.String(), "source", "redis.log")
	return 0
}

func toNumber(lv lua.LValue) (float64, bool) {
	switch a := lv.(type) {
	case lua.LNumber:
		return float64(a), true
	case lua.LString:
		f, err := strconv.ParseFloat(strings.TrimSpace(string(a)), 64)
		return f, err == nil
	}
	return 0, false
}

func (v *vm) setResp(L *lua.LState) int {
	if L.GetTop() != 1 {
		return raise(L, "redis.setresp() requires one argument.")
	}
	n, _ := toNumber(L.Get(1))
	switch int(n) {
	case 2:
		v.scriptRESP3 = false
		v.flags &^= RESP3
	case 3:
		v.scriptRESP3 = true
		v.flags |= RESP3
	default:
		return raise(L, "RESP version must be 2 or 3.")
	}
	return 0
}

func luaSetRepl(L *lua.LState) int {
	if L.GetTop() != 1 {
		return raise(L, "redis.set_repl() requires two arguments.")
	}
	n, _ := toNumber(L.Get(1))
	if int(n)&^3 != 0 {
		return raise(L, "Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.")
	}
	return 0 // celld does not replicate
}

// onError is the error handler of a script run, Redis 7's
// __redis__err__handler: it records the error text (a table's err field,
// or "ERR " and the value) and where the script was when it failed, the
// caller's position when the error came from a Go function.
func (v *vm) onError(L *lua.LState) int {
	obj := L.Get(1)
	v.errSet = true
	switch o := obj.(type) {
	case *lua.LTable:
		switch m := o.RawGetString("err").(type) {
		case lua.LString:
			v.errMsg = string(m)
		case lua.LNumber:
			v.errMsg = luaNumberString(float64(m))
		default:
			v.errMsg = "ERR unknown error"
		}
	case lua.LNumber:
		v.errMsg = "ERR " + luaNumberString(float64(o))
	default:
		v.errMsg = "ERR " + obj.String()
	}
	v.errSource, v.errLine = "", 0
	// Level 0 is this handler, 1 the function that raised.
	for level := 1; level <= 2; level++ {
		dbg, ok := L.GetStack(level)
		if !ok {
			break
		}
		if _, err := L.GetInfo("Sl", dbg, lua.LNil); err != nil {
			break
		}
		if dbg.What == "G" && level == 1 {
			continue
		}
		v.errSource, v.errLine = dbg.Source, dbg.CurrentLine
		if v.errSource == chunkName {
			v.errSource = "@" + chunkName
		}
		break
	}
	L.Push(obj)
	return 1
}

// run executes s and appends its reply.
func (v *vm) run(dst []byte, s *compiled, keys, args [][]byte, opt Options) []byte {
	L := v.L
	L.Env = v.env // setfenv(0, t) in the previous run must not leak
	v.flags = callFlags(s, opt)
	v.scriptRESP3, v.callerRESP3 = false, opt.RESP3
	v.flush = opt.Flush
	defer func() { v.flush = nil }()
	v.errSet = false
	v.keys, v.argv = v.fill(v.keys, keys), v.fill(v.argv, args)
	if v.env.RawGetString("KEYS") != v.keys { // "KEYS = x" is allowed
		v.env.RawSetString("KEYS", v.keys)
	}
	if v.env.RawGetString("ARGV") != v.argv {
		v.env.RawSetString("ARGV", v.argv)
	}
	fn := v.lastFn
	if v.lastProto != s.proto {
		fn = L.NewFunctionFromProto(s.proto)
		v.lastProto, v.lastFn = s.proto, fn
	}
	fn.Env = v.env // setfenv(1, t) in the previous run must not leak

	v.ctx.start(v.e.cfg.TimeLimit)
	L.Push(fn)
	err := L.PCall(0, 1, v.handler)
	timedOut := v.ctx.stop()
	if err != nil {
		var ae *lua.ApiError
		if errors.As(err, &ae) && ae.Type == lua.ApiErrorPanic {
			// A Go panic inside the state: do not trust it again.
			v.broken = true
			v.e.cfg.Logger.Error("panic in script", "panic", ae.Object.String(), "script", s.sha)
		}
		dst = v.appendError(dst, s, err, timedOut)
	} else {
		dst = v.appendReply(dst, L.Get(-1), 0)
	}
	L.SetTop(0)
	if len(keys)+len(args) > maxReusedArray || argBytes(keys)+argBytes(args) > maxArgBuf {
		// Do not keep large arguments alive in an idle state.
		v.keys, v.argv = L.NewTable(), L.NewTable()
		v.env.RawSetString("KEYS", v.keys)
		v.env.RawSetString("ARGV", v.argv)
	}
	return dst
}

func argBytes(items [][]byte) int {
	n := 0
	for _, it := range items {
		n += len(it)
	}
	return n
}

// appendError appends a failed run's error reply in Redis 7's form:
// "-<error text> script: <sha1>, on @user_script:<line>."
func (v *vm) appendError(b []byte, s *compiled, err error, timedOut bool) []byte {
	msg := v.errMsg
	if !v.errSet {
		msg = "ERR " + err.Error()
	}
	if timedOut {
		msg = "ERR script timed out after " + v.e.cfg.TimeLimit.String()
	}
	b = append(b, '-')
	b = appendLine(b, msg)
	if v.errSet && v.errSource != "" {
		b = append(b, " script: "...)
		b = append(b, s.sha...)
		b = append(b, ", on "...)
		b = appendLine(b, v.errSource)
		b = append(b, ':')
		b = strconv.AppendInt(b, int64(v.errLine), 10)
		b = append(b, '.')
	}
	return append(b, '\r', '\n')
}

// ---------------------------------------------------------------------------
// Time limit

// deadline is the context a state runs under. gopher-lua calls Done before
// every instruction; checking the clock every 1024 calls makes the limit
// cost a counter, with no timer, goroutine or allocation per run. Once the
// limit has passed, every instruction fails, so pcall cannot swallow it.
// Go functions (commands, string functions) are not interrupted.
//
// It is used by one goroutine at a time (the one running the state).
type deadline struct {
	begin   time.Time
	limit   time.Duration
	n       uint32
	expired bool
}

var (
	closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()
	errTimeout = errors.New("script time limit exceeded")
)

// start arms the limit. The clock is first read after 1024 instructions
// (most scripts never get there), so the limit runs from then: later than
// the real start by the time of those instructions, microseconds.
func (d *deadline) start(limit time.Duration) {
	d.begin, d.limit, d.n, d.expired = time.Time{}, limit, 0, false
}

// stop ends a run and reports whether it timed out.
func (d *deadline) stop() bool {
	exp := d.expired
	d.limit = 0
	return exp
}

func (d *deadline) Done() <-chan struct{} {
	if d.expired {
		return closedChan
	}
	d.n++
	if d.n&1023 != 0 || d.limit <= 0 {
		return nil
	}
	if d.begin.IsZero() {
		d.begin = time.Now()
	} else if time.Since(d.begin) > d.limit {
		d.expired = true
		return closedChan
	}
	return nil
}

func (d *deadline) Err() error {
	if d.expired {
		return errTimeout
	}
	return nil
}

func (d *deadline) Deadline() (time.Time, bool) { return time.Time{}, false }
func (d *deadline) Value(any) any               { return nil }
