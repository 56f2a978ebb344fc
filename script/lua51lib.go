package script

import (
	"errors"
	"math"
	"strings"
	"sync"

	lua "github.com/yuin/gopher-lua"
	"github.com/yuin/gopher-lua/parse"
)

// Library functions with Lua 5.1's argument rules, replacing gopher-lua's
// where they differ (docs/scripting-lua.md lists what is guaranteed).
// Redis embeds the reference Lua 5.1, whose auxiliary library converts
// arguments the way scripts rely on: a numeric string is a number
// (luaL_checknumber: string.rep('x', ARGV[1]) works), a number is a string
// ("%.14g"), and bad arguments are reported as
// "bad argument #2 to 'rep' (number expected, got string)". gopher-lua
// refuses numeric strings in most integer arguments, formats numbers with
// Go's rules and words errors differently; these replacements follow
// lstrlib.c, lmathlib.c, ltablib.c and lbaselib.c of Lua 5.1.5.
//
// They are installed once per pooled Lua state (installLua51) and cost
// nothing per run; each is called only when a script calls it.

// luaiMaxCStack is Lua 5.1's LUAI_MAXCSTACK: lua_checkstack refuses to
// grow a C function's stack past this many slots (unpack, string.byte).
const luaiMaxCStack = 8000

// funcName is the name Lua 5.1's luaL_argerror gives the running Go
// function: the name it was called by ("rep" for string.rep(...)), or "?".
func funcName(L *lua.LState) string {
	dbg, ok := L.GetStack(0)
	if !ok {
		return "?"
	}
	if _, err := L.GetInfo("n", dbg, lua.LNil); err != nil {
		return "?"
	}
	switch name := dbg.Name; {
	case name == "", name == "?", name == "(anonymous)", name == "main chunk",
		strings.HasPrefix(name, "<"):
		return "?"
	default:
		return name
	}
}

// argError raises luaL_argerror's "bad argument #n to 'f' (msg)". For a
// method call (s:rep(x)) Lua does not count self: "#1" is x, and a bad
// self is "calling 'rep' on bad self (msg)".
func argError(L *lua.LState, n int, msg string) {
	name := funcName(L)
	if name != "?" && calledAsMethod(L, name) {
		n--
		if n == 0 {
			L.RaiseError("%s", "calling '"+name+"' on bad self ("+msg+")")
		}
	}
	L.RaiseError("%s", "bad argument #"+itoa(n)+" to '"+name+"' ("+msg+")")
}

// calledAsMethod reports whether the running Go function was called with
// the method syntax, as Lua 5.1's getfuncname ("method") tells. gopher-lua
// keeps the calling instruction private, so the caller's calls of that
// name on the current line are looked up in its bytecode: a method call's
// function register was last written by OP_SELF. When calls on the line
// disagree, the answer is false.
func calledAsMethod(L *lua.LState, name string) bool {
	dbg, ok := L.GetStack(1)
	if !ok {
		return false
	}
	fv, err := L.GetInfo("lf", dbg, lua.LNil)
	if err != nil {
		return false
	}
	f, ok := fv.(*lua.LFunction)
	if !ok || f.IsG || f.Proto == nil {
		return false
	}
	p := f.Proto
	method, found := false, false
	for _, c := range p.DbgCalls {
		if c.Name != name || c.Pc < 0 || c.Pc >= len(p.Code) || c.Pc >= len(p.DbgSourcePositions) ||
			p.DbgSourcePositions[c.Pc] != dbg.CurrentLine {
			continue
		}
		m := loadedBySelf(p.Code, c.Pc)
		if found && m != method {
			return false
		}
		method, found = m, true
	}
	return method
}

// loadedBySelf reports whether the function register of the call at pc
// was last written by OP_SELF.
func loadedBySelf(code []uint32, pc int) bool {
	const (
		opShift = 26
		aShift  = 18
		maskA   = 0xff
	)
	a := int(code[pc]>>aShift) & maskA
	for i := pc - 1; i >= 0; i-- {
		op := int(code[i] >> opShift)
		if int(code[i]>>aShift)&maskA != a {
			continue
		}
		switch op {
		case lua.OP_SELF:
			return true
		case lua.OP_SETGLOBAL, lua.OP_SETUPVAL, lua.OP_SETTABLE, lua.OP_SETTABLEKS, lua.OP_SETLIST,
			lua.OP_JMP, lua.OP_EQ, lua.OP_LT, lua.OP_LE, lua.OP_TEST, lua.OP_RETURN, lua.OP_CLOSE,
			lua.OP_TAILCALL, lua.OP_NOP:
			continue // does not write R(A)
		}
		return false
	}
	return false
}

// typeError raises luaL_typerror's "(<want> expected, got <type>)".
func typeError(L *lua.LState, n int, want string) {
	argError(L, n, want+" expected, got "+typeName(L, n))
}

// typeName is luaL_typename: "no value" past the last argument.
func typeName(L *lua.LState, n int) string {
	if n > L.GetTop() {
		return "no value"
	}
	return L.Get(n).Type().String()
}

func itoa(n int) string {
	var buf [24]byte
	return string(appendLuaNumber(buf[:0], float64(n)))
}

func isNoneOrNil(L *lua.LState, n int) bool {
	return n > L.GetTop() || L.Get(n) == lua.LNil
}

// toNumber51 is lua_tonumber: a number, or a string luaO_str2d accepts.
func toNumber51(v lua.LValue) (float64, bool) {
	switch a := v.(type) {
	case lua.LNumber:
		return float64(a), true
	case lua.LString:
		return str2number(string(a))
	}
	return 0, false
}

// checkNumber is luaL_checknumber.
func checkNumber(L *lua.LState, n int) float64 {
	f, ok := toNumber51(L.Get(n))
	if !ok {
		typeError(L, n, "number")
	}
	return f
}

// checkInteger is luaL_checkinteger (lua_tointeger truncates).
func checkInteger(L *lua.LState, n int) int64 { return cInt64(checkNumber(L, n)) }

// optInteger is luaL_optinteger.
func optInteger(L *lua.LState, n int, d int64) int64 {
	if isNoneOrNil(L, n) {
		return d
	}
	return checkInteger(L, n)
}

// checkInt is luaL_checkint: a lua_Integer cut to a C int.
func checkInt(L *lua.LState, n int) int { return cInt(checkInteger(L, n)) }

// optInt is luaL_optint.
func optInt(L *lua.LState, n int, d int) int {
	if isNoneOrNil(L, n) {
		return d
	}
	return checkInt(L, n)
}

// checkLString is luaL_checklstring: a string, or a number as "%.14g".
func checkLString(L *lua.LState, n int) string {
	switch a := L.Get(n).(type) {
	case lua.LString:
		return string(a)
	case lua.LNumber:
		return luaNumberString(float64(a))
	}
	typeError(L, n, "string")
	return ""
}

// optLString is luaL_optlstring.
func optLString(L *lua.LState, n int, d string) string {
	if isNoneOrNil(L, n) {
		return d
	}
	return checkLString(L, n)
}

// checkTable is luaL_checktype(L, n, LUA_TTABLE).
func checkTable(L *lua.LState, n int) *lua.LTable {
	t, ok := L.Get(n).(*lua.LTable)
	if !ok {
		typeError(L, n, "table")
	}
	return t
}

// toLString is lua_tolstring for concatenation and table.concat: strings
// and numbers only.
func toLString(v lua.LValue) (string, bool) {
	switch a := v.(type) {
	case lua.LString:
		return string(a), true
	case lua.LNumber:
		return luaNumberString(float64(a)), true
	}
	return "", false
}

// installLua51 replaces the base, string, math and table functions whose
// gopher-lua versions differ from Lua 5.1 in the tables of a new state,
// before the sandbox wraps them. base is the global table the libraries
// were opened into.
func (v *vm) installLua51(base *lua.LTable) {
	L := v.L
	set := func(t *lua.LTable, name string, fn lua.LGFunction) {
		t.RawSetString(name, L.NewFunction(fn))
	}
	set(base, "tonumber", luaToNumber)
	set(base, "tostring", luaToString)
	set(base, "select", luaSelect)
	set(base, "unpack", luaUnpack)
	set(base, "error", luaError)
	set(base, "loadstring", luaLoadString)
	set(base, "load", luaLoad)
	set(base, "assert", luaAssert)
	// Lua's argument checks (and texts) before gopher-lua's own function.
	for name, kinds := range map[string][]argKind{
		"ipairs": {argTable}, "pairs": {argTable}, "next": {argTable},
		"rawget": {argTable, argAny}, "rawequal": {argAny, argAny},
		"rawset": {argTable, argAny, argAny}, "setmetatable": {argTable, argNilOrTable},
		"type": {argAny},
	} {
		wrapChecked(L, base, name, kinds...)
	}

	str := base.RawGetString("string").(*lua.LTable)
	for name, fn := range map[string]lua.LGFunction{
		"byte": strByte, "char": strChar, "find": strFind, "format": strFormat,
		"gmatch": strGmatch, "gsub": strGsub, "len": strLen, "lower": strLower,
		"match": strMatch, "rep": luaStringRep, "reverse": strReverse,
		"sub": strSub, "upper": strUpper,
	} {
		set(str, name, fn)
	}
	str.RawSetString("gfind", str.RawGetString("gmatch")) // LUA_COMPAT_GFIND

	// Arithmetic on strings: gopher-lua's VM converts them with Go's
	// rules ("010" is octal) unless the string metatable has the
	// metamethod, which it consults first; these convert as Lua 5.1 does.
	smt := L.NewTable()
	smt.RawSetString("__index", str)
	smt.RawSetString("__metatable", lua.LFalse)
	for _, ev := range []string{"__add", "__sub", "__mul", "__div", "__mod", "__pow", "__unm"} {
		set(smt, ev, strArith(ev))
	}
	L.SetMetatable(lua.LString(""), smt)

	m := base.RawGetString("math").(*lua.LTable)
	for name, fn := range map[string]func(float64) float64{
		"abs": math.Abs, "acos": math.Acos, "asin": math.Asin, "atan": math.Atan,
		"ceil": math.Ceil, "cos": math.Cos, "cosh": math.Cosh, "exp": math.Exp,
		"floor": math.Floor, "log": math.Log, "log10": math.Log10, "sin": math.Sin,
		"sinh": math.Sinh, "sqrt": math.Sqrt, "tan": math.Tan, "tanh": math.Tanh,
		"deg": func(x float64) float64 { return x / (math.Pi / 180) },
		"rad": func(x float64) float64 { return x * (math.Pi / 180) },
	} {
		set(m, name, func(L *lua.LState) int {
			L.Push(lua.LNumber(fn(checkNumber(L, 1))))
			return 1
		})
	}
	for name, fn := range map[string]func(float64, float64) float64{
		"atan2": math.Atan2, "fmod": math.Mod, "mod": math.Mod, "pow": math.Pow,
	} {
		set(m, name, func(L *lua.LState) int {
			L.Push(lua.LNumber(fn(checkNumber(L, 1), checkNumber(L, 2))))
			return 1
		})
	}
	set(m, "min", func(L *lua.LState) int { return mathMinMax(L, false) })
	set(m, "max", func(L *lua.LState) int { return mathMinMax(L, true) })
	set(m, "modf", mathModf)
	set(m, "frexp", mathFrexp)
	set(m, "ldexp", func(L *lua.LState) int {
		L.Push(lua.LNumber(math.Ldexp(checkNumber(L, 1), checkInt(L, 2))))
		return 1
	})
	set(m, "random", v.e.rand.random)
	set(m, "randomseed", v.e.rand.randomseed)
	m.RawSetString("huge", lua.LNumber(math.Inf(1)))

	tbl := base.RawGetString("table").(*lua.LTable)
	set(tbl, "concat", tableConcat)
	for name, kinds := range map[string][]argKind{
		"sort": {argTable, argOptFunc}, "getn": {argTable}, "maxn": {argTable},
	} {
		wrapChecked(L, tbl, name, kinds...)
	}
	// table.insert and table.remove take their position through
	// luaL_checkint: coerce it, then run gopher-lua's own.
	for _, name := range []string{"insert", "remove"} {
		fn := tbl.RawGetString(name).(*lua.LFunction).GFunction
		set(tbl, name, func(L *lua.LState) int {
			checkTable(L, 1)
			if name == "insert" && L.GetTop() != 2 && L.GetTop() != 3 {
				L.RaiseError("wrong number of arguments to 'insert'")
			}
			if name == "insert" && L.GetTop() == 3 || name == "remove" && !isNoneOrNil(L, 2) {
				L.Replace(2, lua.LNumber(checkInt(L, 2)))
			}
			return fn(L)
		})
	}
}

// argKind is an argument check of checked.
type argKind uint8

const (
	argAny        argKind = iota // luaL_checkany: "value expected"
	argTable                     // luaL_checktype(LUA_TTABLE)
	argOptFunc                   // none, nil or a function (table.sort)
	argNilOrTable                // setmetatable's metatable
)

// wrapChecked replaces t[name], a gopher-lua function, with checked of
// it, keeping its upvalues (ipairs and pairs keep their iterator in one).
func wrapChecked(L *lua.LState, t *lua.LTable, name string, kinds ...argKind) {
	orig := t.RawGetString(name).(*lua.LFunction)
	ups := make([]lua.LValue, len(orig.Upvalues))
	for i, u := range orig.Upvalues {
		ups[i] = u.Value()
	}
	t.RawSetString(name, L.NewClosure(checked(orig.GFunction, kinds...), ups...))
}

// checked runs Lua 5.1's argument checks, with its error texts, before
// fn (a gopher-lua function whose own checks word errors differently).
func checked(fn lua.LGFunction, kinds ...argKind) lua.LGFunction {
	return func(L *lua.LState) int {
		for i, k := range kinds {
			n := i + 1
			switch k {
			case argAny:
				if n > L.GetTop() {
					argError(L, n, "value expected")
				}
			case argTable:
				checkTable(L, n)
			case argOptFunc:
				if _, ok := L.Get(n).(*lua.LFunction); !ok && !isNoneOrNil(L, n) {
					typeError(L, n, "function")
				}
			case argNilOrTable:
				if _, ok := L.Get(n).(*lua.LTable); !ok && (n > L.GetTop() || L.Get(n) != lua.LNil) {
					argError(L, n, "nil or table expected")
				}
			}
		}
		return fn(L)
	}
}

// ---------------------------------------------------------------------------
// Base library

// luaAssert is Lua 5.1's assert(v [, message]).
func luaAssert(L *lua.LState) int {
	if L.GetTop() < 1 {
		argError(L, 1, "value expected")
	}
	if lua.LVAsBool(L.Get(1)) {
		return L.GetTop()
	}
	L.RaiseError("%s", optLString(L, 2, "assertion failed!"))
	return 0
}

// luaToNumber is Lua 5.1's tonumber(e [, base]).
func luaToNumber(L *lua.LState) int {
	base := optInt(L, 2, 10)
	if base == 10 {
		if L.GetTop() < 1 {
			argError(L, 1, "value expected")
		}
		if f, ok := toNumber51(L.Get(1)); ok {
			L.Push(lua.LNumber(f))
			return 1
		}
	} else {
		s := checkLString(L, 1)
		if base < 2 || base > 36 {
			argError(L, 2, "base out of range")
		}
		if n, ok := strtoul(s, base); ok {
			L.Push(lua.LNumber(float64(n)))
			return 1
		}
	}
	L.Push(lua.LNil)
	return 1
}

// luaToString is Lua 5.1's tostring: __tostring, then numbers as "%.14g".
func luaToString(L *lua.LState) int {
	if L.GetTop() < 1 {
		argError(L, 1, "value expected")
	}
	switch a := L.Get(1).(type) {
	case lua.LNumber:
		L.Push(lua.LString(luaNumberString(float64(a))))
	case lua.LString:
		L.Push(a)
	default:
		L.Push(L.ToStringMeta(a))
	}
	return 1
}

// luaError is Lua 5.1's error(message [, level]): a string or number
// message gets the position of the function at that level, when it is a
// Lua function ("user_script:1: 7" for error(7)).
func luaError(L *lua.LState) int {
	level := optInt(L, 2, 1)
	L.SetTop(1)
	obj := L.Get(1)
	if s, ok := toLString(obj); ok && level > 0 {
		obj = lua.LString(where(L, level) + s)
	}
	L.Error(obj, 0)
	return 0
}

// where is luaL_where: "source:line: " of the function level calls up
// from the running Go function, or "" for a Go function.
func where(L *lua.LState, level int) string {
	dbg, ok := L.GetStack(level)
	if !ok {
		return ""
	}
	if _, err := L.GetInfo("Sl", dbg, lua.LNil); err != nil || dbg.What == "G" || dbg.CurrentLine <= 0 {
		return ""
	}
	return dbg.Source + ":" + itoa(dbg.CurrentLine) + ": "
}

// luaLoadString is loadstring(s [, name]) compiling with the same Lua 5.1
// rules as scripts (compileLua51); the function's environment is the
// script's (the state's, as gopher-lua's loadstring gives).
func luaLoadString(L *lua.LState) int {
	return loadChunk(L, checkLString(L, 1), optLString(L, 2, "<string>"))
}

// luaLoad is load(func [, name]): the chunk is the concatenation of the
// strings func returns until it returns nil or "" (gopher-lua's reading,
// bounded like string.rep), compiled as loadstring does.
func luaLoad(L *lua.LState) int {
	fn, ok := L.Get(1).(*lua.LFunction)
	if !ok {
		typeError(L, 1, "function")
	}
	name := optLString(L, 2, "?")
	var b strings.Builder
	for {
		L.Push(fn)
		L.Call(0, 1)
		r := L.Get(-1)
		L.Pop(1)
		if r == lua.LNil {
			break
		}
		s, ok := toLString(r)
		if !ok {
			L.Push(lua.LNil)
			L.Push(lua.LString("reader function must return a string"))
			return 2
		}
		if s == "" {
			break
		}
		if b.Len()+len(s) > maxStringRep {
			L.RaiseError("resulting string too large")
		}
		b.WriteString(s)
	}
	return loadChunk(L, b.String(), name)
}

// loadChunk compiles code (loadstring, load) and pushes the function, or
// nil and the error message.
func loadChunk(L *lua.LState, code, name string) int {
	proto, err := compileLua51(code, name)
	if err != nil {
		msg := err.Error()
		var pe *parse.Error
		if errors.As(err, &pe) {
			msg = syntaxError(err, code, name)
		}
		L.Push(lua.LNil)
		L.Push(lua.LString(msg))
		return 2
	}
	L.Push(L.NewFunctionFromProto(proto))
	return 1
}

// luaSelect is Lua 5.1's select: "#" (any string starting with '#') counts
// the arguments; otherwise an index, from the end when negative.
func luaSelect(L *lua.LState) int {
	n := L.GetTop()
	if s, ok := L.Get(1).(lua.LString); ok && len(s) > 0 && s[0] == '#' {
		L.Push(lua.LNumber(n - 1))
		return 1
	}
	i := checkInt(L, 1)
	if i < 0 {
		i = n + i
	} else if i > n {
		i = n
	}
	if i < 1 {
		argError(L, 1, "index out of range")
	}
	return n - i
}

// luaUnpack is Lua 5.1's unpack(t [, i [, j]]), refusing more results than
// Lua's C stack holds ("too many results to unpack").
func luaUnpack(L *lua.LState) int {
	t := checkTable(L, 1)
	i := optInt(L, 2, 1)
	var e int
	if isNoneOrNil(L, 3) {
		e = t.Len()
	} else {
		e = checkInt(L, 3)
	}
	if i > e {
		return 0
	}
	n := int64(e) - int64(i) + 1
	if n >= math.MaxInt32 || int64(L.GetTop())+n > luaiMaxCStack {
		L.RaiseError("too many results to unpack")
	}
	for k := int64(i); k <= int64(e); k++ {
		L.Push(t.RawGetInt(int(k)))
	}
	return int(n)
}

// strArith is the string metatable's arithmetic metamethod for event:
// Lua 5.1's luaV_arith when an operand is a string (luai_nummod is
// a - floor(a/b)*b), then the other operand's metamethod, then Lua's
// "attempt to perform arithmetic on a string value".
func strArith(event string) lua.LGFunction {
	return func(L *lua.LState) int {
		a := L.Get(1)
		b := a // __unm gets one operand (Lua passes it twice)
		if event != "__unm" {
			b = L.Get(2)
		}
		x, okx := toNumber51(a)
		y, oky := toNumber51(b)
		if okx && oky {
			var r float64
			switch event {
			case "__add":
				r = x + y
			case "__sub":
				r = x - y
			case "__mul":
				r = x * y
			case "__div":
				r = x / y
			case "__mod":
				r = x - math.Floor(x/y)*y
			case "__pow":
				r = math.Pow(x, y)
			case "__unm":
				r = -x
			}
			L.Push(lua.LNumber(r))
			return 1
		}
		for _, o := range []lua.LValue{a, b} {
			if _, isStr := o.(lua.LString); isStr {
				continue
			}
			if mm := L.GetMetaField(o, event); mm != lua.LNil {
				L.Push(mm)
				L.Push(a)
				L.Push(b)
				L.Call(2, 1)
				return 1
			}
		}
		bad := a
		if okx {
			bad = b
		}
		L.RaiseError("attempt to perform arithmetic on a %s value", bad.Type().String())
		return 0
	}
}

// ---------------------------------------------------------------------------
// String library

// posrelat is lstrlib's relative string position: negative counts from
// the end.
func posrelat(pos int64, n int) int64 {
	if pos < 0 {
		pos += int64(n) + 1
	}
	if pos < 0 {
		return 0
	}
	return pos
}

func strLen(L *lua.LState) int {
	L.Push(lua.LNumber(len(checkLString(L, 1))))
	return 1
}

func strSub(L *lua.LState) int {
	s := checkLString(L, 1)
	start := posrelat(checkInteger(L, 2), len(s))
	end := posrelat(optInteger(L, 3, -1), len(s))
	if start < 1 {
		start = 1
	}
	if end > int64(len(s)) {
		end = int64(len(s))
	}
	if start <= end {
		L.Push(lua.LString(s[start-1 : end]))
	} else {
		L.Push(lua.LString(""))
	}
	return 1
}

func strReverse(L *lua.LState) int {
	s := checkLString(L, 1)
	b := make([]byte, len(s))
	for i := range len(s) {
		b[len(s)-1-i] = s[i]
	}
	L.Push(lua.LString(b))
	return 1
}

// strLower and strUpper change ASCII letters only (the C locale).
func strLower(L *lua.LState) int {
	s := checkLString(L, 1)
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	L.Push(lua.LString(b))
	return 1
}

func strUpper(L *lua.LState) int {
	s := checkLString(L, 1)
	b := []byte(s)
	for i, c := range b {
		if 'a' <= c && c <= 'z' {
			b[i] = c - ('a' - 'A')
		}
	}
	L.Push(lua.LString(b))
	return 1
}

// luaStringRep is string.rep(s, n), bounded by maxStringRep.
func luaStringRep(L *lua.LState) int {
	s := checkLString(L, 1)
	n := checkInt(L, 2)
	if n <= 0 || len(s) == 0 {
		L.Push(lua.LString(""))
		return 1
	}
	if n > maxStringRep/len(s) {
		L.RaiseError("resulting string too large")
	}
	L.Push(lua.LString(strings.Repeat(s, n)))
	return 1
}

func strByte(L *lua.LState) int {
	s := checkLString(L, 1)
	posi := posrelat(optInteger(L, 2, 1), len(s))
	pose := posrelat(optInteger(L, 3, posi), len(s))
	if posi <= 0 {
		posi = 1
	}
	if pose > int64(len(s)) {
		pose = int64(len(s))
	}
	if posi > pose {
		return 0
	}
	n := pose - posi + 1
	if n >= math.MaxInt32 || int64(L.GetTop())+n > luaiMaxCStack {
		L.RaiseError("stack overflow (string slice too long)")
	}
	for i := posi; i <= pose; i++ {
		L.Push(lua.LNumber(s[i-1]))
	}
	return int(n)
}

func strChar(L *lua.LState) int {
	n := L.GetTop()
	b := make([]byte, n)
	for i := 1; i <= n; i++ {
		c := checkInt(L, i)
		if c != int(uint8(c)) {
			argError(L, i, "invalid value")
		}
		b[i-1] = byte(c)
	}
	L.Push(lua.LString(b))
	return 1
}

// luaSpecials are the characters that make str_find use the pattern
// matcher rather than a plain search.
const luaSpecials = "^$*+?.([%-"

// strFind and strMatch are lstrlib's str_find_aux, with Lua 5.1's
// matcher (lua51match.go).
func strFind(L *lua.LState) int { return strFindAux(L, true) }

func strMatch(L *lua.LState) int { return strFindAux(L, false) }

func strFindAux(L *lua.LState, find bool) int {
	s := checkLString(L, 1)
	p := checkLString(L, 2)
	init := posrelat(optInteger(L, 3, 1), len(s)) - 1
	if init < 0 {
		init = 0
	} else if init > int64(len(s)) {
		init = int64(len(s))
	}
	if find && (lua.LVAsBool(L.Get(4)) || !strings.ContainsAny(cString(p), luaSpecials)) {
		if i := strings.Index(s[init:], p); i >= 0 {
			L.Push(lua.LNumber(int(init) + i + 1))
			L.Push(lua.LNumber(int(init) + i + len(p)))
			return 2
		}
		L.Push(lua.LNil)
		return 1
	}
	ms := &matchState{L: L, src: s, pat: cString(p)}
	pi, anchor := 0, strings.HasPrefix(ms.pat, "^")
	if anchor {
		pi = 1
	}
	for s1 := int(init); ; s1++ {
		ms.level = 0
		if e := ms.match(s1, pi); e >= 0 {
			if find {
				L.Push(lua.LNumber(s1 + 1))
				L.Push(lua.LNumber(e))
				return ms.pushCaptures(0, 0, false) + 2
			}
			return ms.pushCaptures(s1, e, true)
		}
		if s1 >= len(s) || anchor {
			break
		}
	}
	L.Push(lua.LNil)
	return 1
}

// cString is s up to its first NUL, as C's string functions see it.
func cString(s string) string {
	if i := strings.IndexByte(s, 0); i >= 0 {
		return s[:i]
	}
	return s
}

// strGmatch returns an iterator over the matches of p in s (gmatch_aux:
// each call looks for the next match; '^' is a plain character).
func strGmatch(L *lua.LState) int {
	s := checkLString(L, 1)
	p := checkLString(L, 2)
	start := 0
	L.Push(L.NewFunction(func(L *lua.LState) int {
		ms := &matchState{L: L, src: s, pat: cString(p)}
		for src := start; src <= len(s); src++ {
			ms.level = 0
			if e := ms.match(src, 0); e >= 0 {
				start = e
				if e == src {
					start++ // empty match: go at least one position
				}
				return ms.pushCaptures(src, e, true)
			}
		}
		start = len(s) + 1
		return 0
	}))
	return 1
}

// strGsub is lstrlib's str_gsub.
func strGsub(L *lua.LState) int {
	src := checkLString(L, 1)
	p := checkLString(L, 2)
	repl := L.Get(3)
	switch repl.Type() {
	case lua.LTNumber, lua.LTString, lua.LTFunction, lua.LTTable:
	default:
		argError(L, 3, "string/function/table expected")
	}
	maxS := optInt(L, 4, len(src)+1)
	ms := &matchState{L: L, src: src, pat: cString(p)}
	pi, anchor := 0, strings.HasPrefix(ms.pat, "^")
	if anchor {
		pi = 1
	}
	var b strings.Builder
	n, at := 0, 0
	for n < maxS {
		ms.level = 0
		e := ms.match(at, pi)
		if e >= 0 {
			n++
			gsubAddValue(ms, &b, repl, at, e)
		}
		if e > at { // non-empty match: skip it
			at = e
		} else if at < len(src) {
			b.WriteByte(src[at])
			at++
		} else {
			break
		}
		if anchor {
			break
		}
	}
	b.WriteString(src[at:])
	L.Push(lua.LString(b.String()))
	L.Push(lua.LNumber(n))
	return 2
}

// gsubAddValue is lstrlib's add_value: the replacement of the match [s, e).
func gsubAddValue(ms *matchState, b *strings.Builder, repl lua.LValue, s, e int) {
	L := ms.L
	var val lua.LValue
	switch r := repl.(type) {
	case lua.LString, lua.LNumber:
		rs, _ := toLString(r)
		gsubAddString(ms, b, rs, s, e)
		return
	case *lua.LFunction:
		L.Push(r)
		n := ms.pushCaptures(s, e, true)
		L.Call(n, 1)
		val = L.Get(-1)
		L.Pop(1)
	case *lua.LTable:
		val = L.GetTable(r, ms.oneCapture(0, s, e))
	}
	if !lua.LVAsBool(val) {
		b.WriteString(ms.src[s:e])
	} else if vs, ok := toLString(val); ok {
		b.WriteString(vs)
	} else {
		L.RaiseError("invalid replacement value (a %s)", val.Type().String())
	}
}

// gsubAddString is lstrlib's add_s: %0-%9 are captures, %x is x.
func gsubAddString(ms *matchState, b *strings.Builder, repl string, s, e int) {
	for i := 0; i < len(repl); i++ {
		c := repl[i]
		if c != '%' {
			b.WriteByte(c)
			continue
		}
		i++
		c = 0 // past the end Lua reads the string's terminating NUL, and adds it
		if i < len(repl) {
			c = repl[i]
		}
		switch {
		case !isDigit(c):
			b.WriteByte(c)
		case c == '0':
			b.WriteString(ms.src[s:e])
		default:
			vs, _ := toLString(ms.oneCapture(int(c-'1'), s, e))
			b.WriteString(vs)
		}
	}
}

// ---------------------------------------------------------------------------
// Math library

func mathMinMax(L *lua.LState, isMax bool) int {
	n := L.GetTop()
	r := checkNumber(L, 1)
	for i := 2; i <= n; i++ {
		d := checkNumber(L, i)
		if isMax && d > r || !isMax && d < r {
			r = d
		}
	}
	L.Push(lua.LNumber(r))
	return 1
}

// mathModf is C's modf: modf(±inf) is (±inf, ±0).
func mathModf(L *lua.LState) int {
	x := checkNumber(L, 1)
	ip, fp := math.Modf(x)
	if math.IsInf(x, 0) {
		fp = math.Copysign(0, x)
	}
	L.Push(lua.LNumber(ip))
	L.Push(lua.LNumber(fp))
	return 2
}

func mathFrexp(L *lua.LState) int {
	f, e := math.Frexp(checkNumber(L, 1))
	L.Push(lua.LNumber(f))
	L.Push(lua.LNumber(e))
	return 2
}

// rand48 is Redis's math.random generator (rand.c: the drand48 linear
// congruence), one per Engine as Redis has one per server: seeded with
// math.randomseed, otherwise continuing from the previous script. Safe for
// concurrent use.
type rand48 struct {
	mu sync.Mutex
	x  uint64 // 48-bit state
}

const (
	rand48Init = 0x1234ABCD330E
	rand48A    = 0x5DEECE66D
	rand48C    = 0xB
	rand48Mask = 1<<48 - 1
	rand48Max  = math.MaxInt32 // REDIS_LRAND48_MAX
)

func newRand48() *rand48 { return &rand48{x: rand48Init} }

// next is redisLrand48: the next 31-bit value.
func (r *rand48) next() int32 {
	r.mu.Lock()
	r.x = (rand48A*r.x + rand48C) & rand48Mask
	x := r.x
	r.mu.Unlock()
	return int32(x >> 17)
}

// seed is redisSrand48.
func (r *rand48) seed(s int32) {
	r.mu.Lock()
	r.x = uint64(uint32(s))<<16 | 0x330E
	r.mu.Unlock()
}

// random is Redis's redis_math_random.
func (r *rand48) random(L *lua.LState) int {
	f := float64(r.next()%rand48Max) / rand48Max
	switch L.GetTop() {
	case 0:
		L.Push(lua.LNumber(f))
	case 1:
		u := checkInt(L, 1)
		if u < 1 {
			argError(L, 1, "interval is empty")
		}
		L.Push(lua.LNumber(math.Floor(f*float64(u)) + 1))
	case 2:
		l := checkInt(L, 1)
		u := checkInt(L, 2)
		if l > u {
			argError(L, 2, "interval is empty")
		}
		L.Push(lua.LNumber(math.Floor(f*float64(int32(u)-int32(l)+1)) + float64(l))) // C int arithmetic
	default:
		L.RaiseError("wrong number of arguments")
	}
	return 1
}

// randomseed is Redis's redis_math_randomseed.
func (r *rand48) randomseed(L *lua.LState) int {
	r.seed(int32(checkInt(L, 1)))
	return 0
}

// ---------------------------------------------------------------------------
// Table library

// tableConcat is Lua 5.1's table.concat(t [, sep [, i [, j]]]).
func tableConcat(L *lua.LState) int {
	sep := optLString(L, 2, "")
	t := checkTable(L, 1)
	i := optInt(L, 3, 1)
	var last int
	if isNoneOrNil(L, 4) {
		last = t.Len()
	} else {
		last = checkInt(L, 4)
	}
	var b strings.Builder
	add := func(i int) {
		v := t.RawGetInt(i)
		s, ok := toLString(v)
		if !ok { // Redis's wording (its Lua names the type)
			L.RaiseError("invalid value (%s) at index %d in table for 'concat'", v.Type().String(), i)
		}
		b.WriteString(s)
	}
	for ; i < last; i++ {
		add(i)
		b.WriteString(sep)
		if b.Len() > maxStringRep {
			L.RaiseError("resulting string too large")
		}
	}
	if i == last {
		add(i)
	}
	L.Push(lua.LString(b.String()))
	return 1
}
