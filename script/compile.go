package script

import (
	"errors"
	"slices"
	"strconv"
	"strings"

	lua "github.com/yuin/gopher-lua"
	"github.com/yuin/gopher-lua/parse"
)

// chunkName is the name Redis 7 gives every EVAL script; it shows in error
// positions ("user_script:1: ...") and, with an '@', in the "on
// @user_script:1." suffix of script errors.
const chunkName = "user_script"

// Shebang flags Redis 7.2 accepts after "#!lua flags=".
var shebangFlags = map[string]bool{
	"no-writes":             true,
	"allow-oom":             true,
	"allow-stale":           true,
	"no-cluster":            true,
	"allow-cross-slot-keys": true,
}

// compile parses a script's optional shebang and compiles its body.
func compile(body string) (*compiled, error) {
	s := &compiled{sha: SHA1Hex([]byte(body)), body: body, compat: true}
	code := body
	if strings.HasPrefix(body, "#!") {
		end := strings.IndexByte(body, '\n')
		if end < 0 {
			return nil, &LoadError{Msg: "Invalid script shebang"}
		}
		parts := strings.Fields(body[:end])
		if len(parts) == 0 {
			return nil, &LoadError{Msg: "Invalid engine in script shebang"}
		}
		if parts[0] != "#!lua" {
			return nil, &LoadError{Msg: "Unexpected engine in script shebang: " + parts[0]}
		}
		s.compat = false
		for _, p := range parts[1:] {
			list, ok := strings.CutPrefix(p, "flags=")
			if !ok {
				return nil, &LoadError{Msg: "Unknown lua shebang option: " + p}
			}
			if list == "" {
				continue
			}
			for _, f := range strings.Split(list, ",") {
				if !shebangFlags[f] {
					return nil, &LoadError{Msg: "Unexpected flag in script shebang: " + f}
				}
				switch f {
				case "no-writes":
					s.noWrites = true
				case "allow-oom":
					s.allowOOM = true
				}
			}
		}
		// Compile from the newline on, so line numbers stay the body's.
		code = body[end:]
	}
	proto, err := compileLua51(code, chunkName)
	var pe *parse.Error
	if errors.As(err, &pe) {
		return nil, &LoadError{Msg: "Error compiling script (new function): " + syntaxError(err, code, chunkName)}
	}
	if err != nil {
		msg := err.Error()
		var ce *lua.CompileError
		if errors.As(err, &ce) {
			msg = chunkName + ":" + strconv.Itoa(ce.Line) + ": " + ce.Message
		}
		return nil, &LoadError{Msg: "Error compiling script (new function): " + msg}
	}
	// Lua 5.0's implicit "arg" table for a vararg main chunk costs a table
	// and a map per run and no script uses it (EVAL passes no "...").
	proto.IsVarArg &^= lua.VarArgNeedsArg
	s.proto = proto
	s.oneCommand = atMostOneCommand(proto)
	s.direct = directCall(proto)
	return s, nil
}

// compileLua51 parses and compiles code with Lua 5.1's .. and number
// literals (lua51concat.go). Errors are parse.Parse's or lua.Compile's.
func compileLua51(code, name string) (*lua.FunctionProto, error) {
	chunk, err := parse.Parse(strings.NewReader(code), name)
	if err != nil {
		return nil, err
	}
	sites, ok := rewriteChunk(chunk)
	if !ok { // the code spells a placeholder: compile it unchanged
		sites = nil
		if chunk, err = parse.Parse(strings.NewReader(code), name); err != nil {
			return nil, err
		}
	}
	proto, err := lua.Compile(chunk, name)
	if err != nil {
		return nil, err
	}
	installConcat(proto, concatFuncs(sites))
	clipProto(proto)
	return proto, nil
}

// clipProto copies each slice of a compiled function (and of the
// functions it nests) to its length. gopher-lua compiles into slices made
// with room to grow (1,024 instructions and 1,024 line numbers from its
// code store, 128 debug calls, 32 constants, 16 nested functions...):
// about 16 KB per function whatever its size, which a cached script would
// keep for good (SCRIPT LOAD pins it). Nothing appends to a proto once
// compiled: the VM only reads it. (stringConstants, unexported, keeps its
// 32 slots: 512 B.)
func clipProto(p *lua.FunctionProto) {
	p.Code = clip(p.Code)
	p.Constants = clip(p.Constants)
	p.FunctionPrototypes = clip(p.FunctionPrototypes)
	p.DbgSourcePositions = clip(p.DbgSourcePositions)
	p.DbgLocals = clip(p.DbgLocals)
	p.DbgCalls = clip(p.DbgCalls)
	p.DbgUpvalues = clip(p.DbgUpvalues)
	for _, q := range p.FunctionPrototypes {
		clipProto(q)
	}
}

// clip is a copy of s at its length; nil when s is empty (an empty clone
// would still point into, and keep, s's array).
func clip[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return slices.Clone(s)
}

// atMostOneCommand reports whether a script can run at most one command,
// judged from its bytecode, conservatively: straight-line code (no jumps,
// loops or tests of any kind, no nested functions) whose only call, if
// any, is redis.call or redis.pcall loaded right before it, the pattern
// "return redis.call(...)" and "local r = redis.call(...) ... return r"
// compile to. Such a script is atomic without excluding other clients: its
// one command is atomic on its own. Nothing else it does can run a command:
// every other value it can reach is a plain table, a string or a number
// (metamethods exist only on the sandbox's own tables, where they read a
// table or raise), and redis.call takes only strings and numbers.
//
// Any opcode not listed below makes the answer false, which is always safe.
func atMostOneCommand(p *lua.FunctionProto) bool {
	if len(p.FunctionPrototypes) != 0 {
		return false
	}
	const (
		noReg    = -1
		bitRK    = 1 << 8 // gopher-lua's RK flag in B and C
		opShift  = 26
		aShift   = 18
		maskA    = 0xff
		maskB    = 0x1ff
		maskC    = 0x1ff
		maskBx   = 0x3ffff
		cShift   = 9
		maxCalls = 1
	)
	constant := func(i int) (string, bool) {
		if i < 0 || i >= len(p.Constants) {
			return "", false
		}
		s, ok := p.Constants[i].(lua.LString)
		return string(s), ok
	}
	calls := 0
	fnReg := noReg // register holding redis.call/pcall, loaded and untouched since
	redisReg := noReg
	// Registers holding a concatenation function (lua51concat.go), loaded
	// by LOADK: calling one runs no command (it calls only __concat
	// metamethods, and straight-line code without other calls cannot have
	// set one).
	var concatRegs [256]bool
	isConcatK := func(i int) bool {
		if i < 0 || i >= len(p.Constants) {
			return false
		}
		f, ok := p.Constants[i].(*lua.LFunction)
		return ok && f.IsG && f.Env == concatEnv
	}
	for _, inst := range p.Code {
		op := int(inst >> opShift)
		a := int(inst>>aShift) & maskA
		b := int(inst) & maskB
		c := int(inst>>cShift) & maskC
		var wrote []int // registers this instruction writes: the last two patterns need it
		switch op {
		case lua.OP_LOADK:
			wrote = []int{a}
			if isConcatK(int(inst) & maskBx) {
				for _, r := range wrote {
					if r == fnReg {
						fnReg = noReg
					}
					if r == redisReg {
						redisReg = noReg
					}
				}
				concatRegs[a] = true
				continue
			}
		case lua.OP_MOVE, lua.OP_MOVEN, lua.OP_GETUPVAL, lua.OP_GETTABLE,
			lua.OP_NEWTABLE, lua.OP_ADD, lua.OP_SUB, lua.OP_MUL, lua.OP_DIV, lua.OP_MOD,
			lua.OP_POW, lua.OP_UNM, lua.OP_NOT, lua.OP_LEN, lua.OP_CONCAT:
			wrote = []int{a}
		case lua.OP_LOADBOOL:
			if c != 0 { // skips the next instruction
				return false
			}
			wrote = []int{a}
		case lua.OP_LOADNIL:
			for r := a; r <= b; r++ {
				wrote = append(wrote, r)
			}
		case lua.OP_SELF:
			wrote = []int{a, a + 1}
		case lua.OP_GETGLOBAL:
			if name, ok := constant(int(inst) & maskBx); ok && name == "redis" {
				if fnReg == a {
					fnReg = noReg
				}
				redisReg = a
				continue
			}
			wrote = []int{a}
		case lua.OP_GETTABLEKS:
			if b == redisReg && c&bitRK != 0 {
				if name, ok := constant(c &^ bitRK); ok && (name == "call" || name == "pcall") {
					if redisReg == a {
						redisReg = noReg
					}
					fnReg = a
					continue
				}
			}
			wrote = []int{a}
		case lua.OP_SETGLOBAL, lua.OP_SETTABLE, lua.OP_SETTABLEKS, lua.OP_SETUPVAL,
			lua.OP_SETLIST, lua.OP_CLOSE, lua.OP_NOP:
		case lua.OP_CALL, lua.OP_TAILCALL:
			if concatRegs[a] {
				// Its results overwrite R(A) and up (all of them for C = 0).
				for r := a; r < len(concatRegs); r++ {
					concatRegs[r] = false
				}
				if fnReg >= a {
					fnReg = noReg
				}
				if redisReg >= a {
					redisReg = noReg
				}
				continue
			}
			calls++
			if calls > maxCalls || a != fnReg {
				return false
			}
			fnReg, redisReg = noReg, noReg // results overwrite R(A)...
		case lua.OP_RETURN:
		default: // jumps, tests, loops, closures, varargs
			return false
		}
		for _, r := range wrote {
			if r == fnReg {
				fnReg = noReg
			}
			if r == redisReg {
				redisReg = noReg
			}
			if r < len(concatRegs) {
				concatRegs[r] = false
			}
		}
	}
	return true
}

// syntaxError formats a gopher-lua parse error of the chunk name the way
// Lua 5.1 does: "user_script:LINE: MESSAGE near 'TOKEN'" ("near '<eof>'" at the end).
// The message text itself is gopher-lua's.
func syntaxError(err error, code, name string) string {
	var pe *parse.Error
	if !errors.As(err, &pe) {
		return name + ": " + strings.TrimSpace(err.Error())
	}
	line, token := pe.Pos.Line, "'"+pe.Token+"'"
	if line == parse.EOF {
		line = strings.Count(code, "\n") + 1
		token = "'<eof>'"
	}
	return name + ":" + strconv.Itoa(line) + ": " + strings.TrimSpace(pe.Message) + " near " + token
}
