package script

import (
	"strconv"

	lua "github.com/yuin/gopher-lua"
)

// The direct path. A script that is nothing but
//
//	return redis.call('<command>', <arg>, ...)      (or redis.pcall)
//
// where every argument is a string literal, KEYS[n] or ARGV[n], does the
// same thing every run: one command built from its arguments, whose reply
// goes through Redis → Lua → Redis conversion and back to the caller. That
// conversion is the identity for most replies, so such a script is run
// without the Lua VM: the command's arguments are taken straight from
// KEYS/ARGV, and its reply re-encoded as the round trip through Lua would
// (integers through a float64, nulls as the caller's null, a raised error
// with the " script: <sha1>, on @user_script:<line>." suffix). Anything the
// re-encoder does not know is converted through Lua values exactly as the
// VM path does, and a run whose KEYS[n]/ARGV[n] is missing (a nil
// argument, an error in the VM path) takes the VM path. The rate-limit
// script ("return redis.call('cl.throttle', KEYS[1], ARGV[1], ...)") is
// this shape. TestDirectMatchesVM checks the two paths against each other.

type directArgKind uint8

const (
	argConst directArgKind = iota
	argKey
	argArgv
)

type directArg struct {
	kind directArgKind
	idx  int    // 0-based index into KEYS or ARGV
	val  []byte // argConst
}

type direct struct {
	pcall bool
	args  []directArg // args[0] is the command name
	line  int         // of the call, for error suffixes
}

// directCall recognises the shape in p's bytecode, or returns nil.
func directCall(p *lua.FunctionProto) *direct {
	if len(p.FunctionPrototypes) != 0 || len(p.Code) < 3 {
		return nil
	}
	const (
		opShift = 26
		aShift  = 18
		cShift  = 9
		maskA   = 0xff
		mask9   = 0x1ff
		maskBx  = 0x3ffff
		bitRK   = 1 << 8
	)
	dec := func(inst uint32) (op, a, b, c, bx int) {
		return int(inst >> opShift), int(inst>>aShift) & maskA, int(inst) & mask9,
			int(inst>>cShift) & mask9, int(inst) & maskBx
	}
	str := func(k int) (string, bool) {
		if k < 0 || k >= len(p.Constants) {
			return "", false
		}
		s, ok := p.Constants[k].(lua.LString)
		return string(s), ok
	}
	code := p.Code
	op, a, _, _, bx := dec(code[0])
	if name, ok := str(bx); op != lua.OP_GETGLOBAL || !ok || name != "redis" {
		return nil
	}
	fn := a
	op, a, b, c, _ := dec(code[1])
	if op != lua.OP_GETTABLEKS || a != fn || b != fn || c&bitRK == 0 {
		return nil
	}
	name, ok := str(c &^ bitRK)
	if !ok || (name != "call" && name != "pcall") {
		return nil
	}
	d := &direct{pcall: name == "pcall"}
	pc := 2
	for reg := fn + 1; pc < len(code); reg++ {
		op, a, _, _, bx := dec(code[pc])
		if op == lua.OP_TAILCALL {
			break
		}
		if a != reg {
			return nil
		}
		switch op {
		case lua.OP_LOADK:
			s, ok := str(bx)
			if !ok {
				return nil
			}
			d.args = append(d.args, directArg{kind: argConst, val: []byte(s)})
			pc++
		case lua.OP_GETGLOBAL:
			g, ok := str(bx)
			if !ok || (g != "KEYS" && g != "ARGV") || pc+1 >= len(code) {
				return nil
			}
			op2, a2, b2, c2, _ := dec(code[pc+1])
			if op2 != lua.OP_GETTABLE || a2 != reg || b2 != reg || c2&bitRK == 0 {
				return nil
			}
			k := c2 &^ bitRK
			if k >= len(p.Constants) {
				return nil
			}
			n, ok := p.Constants[k].(lua.LNumber)
			if !ok || n < 1 || n != lua.LNumber(int(n)) {
				return nil
			}
			kind := argKey
			if g == "ARGV" {
				kind = argArgv
			}
			d.args = append(d.args, directArg{kind: kind, idx: int(n) - 1})
			pc += 2
		default:
			return nil
		}
	}
	// TAILCALL fn, nargs+1, 0; RETURN fn, 0; RETURN 0, 1 and nothing else.
	if pc+3 != len(code) || len(d.args) == 0 || d.args[0].kind != argConst {
		return nil
	}
	op, a, b, _, _ = dec(code[pc])
	if op != lua.OP_TAILCALL || a != fn || b != len(d.args)+1 {
		return nil
	}
	if op, a, b, _, _ = dec(code[pc+1]); op != lua.OP_RETURN || a != fn || b != 0 {
		return nil
	}
	if op, _, _, _, _ = dec(code[pc+2]); op != lua.OP_RETURN {
		return nil
	}
	if pc < len(p.DbgSourcePositions) {
		d.line = p.DbgSourcePositions[pc]
	}
	return d
}

// usable reports whether every KEYS[n]/ARGV[n] the call names exists.
func (d *direct) usable(keys, args [][]byte) bool {
	for _, a := range d.args {
		switch {
		case a.kind == argKey && a.idx >= len(keys):
			return false
		case a.kind == argArgv && a.idx >= len(args):
			return false
		}
	}
	return true
}

// runDirect runs s's single call without the VM; see the top of this file.
func (v *vm) runDirect(dst []byte, s *compiled, keys, args [][]byte, opt Options) []byte {
	d := s.direct
	v.args = v.args[:0]
	for _, a := range d.args {
		switch a.kind {
		case argConst:
			v.args = append(v.args, a.val)
		case argKey:
			v.args = append(v.args, keys[a.idx])
		default:
			v.args = append(v.args, args[a.idx])
		}
	}
	flags := callFlags(s, opt)
	reply := v.host.Call(v.args, flags)
	clear(v.args)
	v.scriptRESP3, v.callerRESP3 = false, opt.RESP3
	v.flush = opt.Flush // the long way's appendReply (reencode never flushes: it may fail half-way and start again)
	defer func() { v.flush = nil }()

	if len(reply) > 0 && reply[0] == '-' {
		if hdr, _, ok := line(reply); ok {
			return v.appendCallError(dst, s, errorText("-"+string(hdr)))
		}
	} else if out, rest, ok := v.reencode(dst, reply, 0); ok && len(rest) == 0 {
		return out
	}
	// The long way, exactly as the VM path.
	val, isErr := v.parseReply(reply)
	if isErr {
		msg := "ERR unknown error"
		if t, ok := val.(*lua.LTable); ok {
			if m, ok := t.RawGetString("err").(lua.LString); ok {
				msg = string(m)
			}
		}
		dst = v.appendCallError(dst, s, msg)
	} else {
		dst = v.appendReply(dst, val, 0)
	}
	v.L.SetTop(0)
	return dst
}

// appendCallError appends the error the call returned: as the script's
// error (with the position suffix) for redis.call, which raises it, or as
// the returned error table for redis.pcall.
func (v *vm) appendCallError(b []byte, s *compiled, msg string) []byte {
	b = append(b, '-')
	b = appendLine(b, msg)
	if !s.direct.pcall {
		b = append(b, " script: "...)
		b = append(b, s.sha...)
		b = append(b, ", on @"+chunkName+":"...)
		b = strconv.AppendInt(b, int64(s.direct.line), 10)
		b = append(b, '.')
	}
	return append(b, '\r', '\n')
}

// reencode appends what converting one RESP2 reply to Lua and back gives,
// for the types whose round trip it knows; ok is false for anything else
// (the caller then converts through Lua).
func (v *vm) reencode(b, r []byte, depth int) (out, rest []byte, ok bool) {
	if len(r) == 0 || depth >= maxReplyDepth {
		return b, nil, false
	}
	kind := r[0]
	hdr, rest, ok := line(r)
	if !ok {
		return b, nil, false
	}
	switch kind {
	case ':':
		if shortCanonicalInt(hdr) {
			// Exact in a float64 and already in AppendInt's form: as is.
			return append(b, r[:len(hdr)+3]...), rest, true
		}
		n, ok := parseInt(hdr)
		if !ok {
			return b, nil, false
		}
		return appendInt(b, int64(float64(n))), rest, true // a Lua number is a float64
	case '+':
		b = append(b, '+')
		b = append(b, hdr...) // a header line holds no CR LF
		return append(b, '\r', '\n'), rest, true
	case '-': // inside an array: an {err = ...} table
		b = append(b, '-')
		b = appendLine(b, errorText("-"+string(hdr)))
		return append(b, '\r', '\n'), rest, true
	case '$':
		n, ok := parseInt(hdr)
		if !ok {
			return b, nil, false
		}
		if n < 0 { // false
			return v.appendNull(b), rest, true
		}
		p, rest, ok := bulk(rest, n)
		if !ok {
			return b, nil, false
		}
		b = appendHeader(b, '$', len(p))
		b = append(b, p...)
		return append(b, '\r', '\n'), rest, true
	case '*':
		n, ok := parseInt(hdr)
		if !ok {
			return b, nil, false
		}
		if n < 0 { // false
			return v.appendNull(b), rest, true
		}
		b = appendHeader(b, '*', int(n)) // no element converts to nil: none ends the array early
		for i := int64(0); i < n; i++ {
			if b, rest, ok = v.reencode(b, rest, depth+1); !ok {
				return b, nil, false
			}
		}
		return b, rest, true
	}
	return b, nil, false
}

// shortCanonicalInt reports whether t is an integer of at most 15 digits
// (so exact in a float64) written as strconv.AppendInt writes it: no '+',
// no leading zeros, no "-0".
func shortCanonicalInt(t []byte) bool {
	if len(t) > 0 && t[0] == '-' {
		t = t[1:]
		if len(t) > 0 && t[0] == '0' {
			return false
		}
	}
	if len(t) == 0 || len(t) > 15 || (t[0] == '0' && len(t) > 1) {
		return false
	}
	for _, c := range t {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
