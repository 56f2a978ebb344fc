package script

import (
	"math"
	"strconv"
	"strings"

	lua "github.com/yuin/gopher-lua"
	"github.com/yuin/gopher-lua/ast"
)

// The .. operator and number literals, Lua 5.1's way.
//
// gopher-lua's VM concatenates numbers with Go's formatting (1e15 becomes
// "1000000000000000", 1/3 "0.3333333333333333") where Lua 5.1 uses "%.14g"
// ("1e+15", "0.33333333333333"), and its compiler reads the literal 010 as
// octal 8. Neither is reachable through gopher-lua's API (the conversion
// is LNumber.String, fixed by the type), so scripts are rewritten before
// they are compiled, once per script (the compiled function is cached and
// shared; runs pay nothing for the rewrite itself):
//
//   - every chain e1 .. e2 .. ... .. en whose operands are not all literals
//     becomes a call of a Go function that does Lua 5.1's luaV_concat
//     (numbers as "%.14g", __concat metamethods, Lua's error text
//     "attempt to concatenate local 'x' (a nil value)"); the function is
//     put into the compiled code as a constant, one per chain, so no name
//     is looked up and no script can shadow or replace it;
//   - chains of literals only are folded to one string literal, with
//     numbers in Lua's format;
//   - number literals are re-read with Lua's rules (str2number).
//
// The cost of the call is paid only by scripts that use .. on values that
// are not literals: one Go function call per chain instead of the
// OP_CONCAT instruction.

// concatMarker prefixes the placeholder string constants that stand for
// the concatenation functions until they are swapped in after compiling.
// A NUL byte keeps it apart from anything a script can mean to write.
const concatMarker = "\x00celld:concat:"

// concatEnv is the environment of the concatenation functions (a Go
// function needs one; nothing reads or writes it).
var concatEnv = &lua.LTable{}

// rewriter rewrites one script's syntax tree.
type rewriter struct {
	sites [][]string // per chain: each operand's description for errors
	clash bool       // the script itself has a string starting with concatMarker
	scope *scope
}

// scope is a block's local variables; fn tells apart the function they
// belong to (locals of an enclosing function are upvalues).
type scope struct {
	names  []string
	parent *scope
	fn     int
}

func (r *rewriter) push(fn int) {
	r.scope = &scope{parent: r.scope, fn: fn}
}

func (r *rewriter) pop() { r.scope = r.scope.parent }

func (r *rewriter) declare(names ...string) {
	r.scope.names = append(r.scope.names, names...)
}

// kind is how Lua 5.1's getobjname describes a variable: "local",
// "upvalue" or "global".
func (r *rewriter) kind(name string) string {
	fn := r.scope.fn
	for s := r.scope; s != nil; s = s.parent {
		for i := len(s.names) - 1; i >= 0; i-- {
			if s.names[i] == name {
				if s.fn == fn {
					return "local"
				}
				return "upvalue"
			}
		}
	}
	return "global"
}

// rewriteChunk rewrites a parsed chunk in place and returns the
// concatenation sites, or ok false if the script cannot be rewritten
// safely (then it is compiled as it is).
func rewriteChunk(chunk []ast.Stmt) (sites [][]string, ok bool) {
	r := &rewriter{}
	r.push(0)
	r.block(chunk, 0)
	return r.sites, !r.clash
}

func (r *rewriter) block(stmts []ast.Stmt, fn int) {
	r.push(fn)
	for _, s := range stmts {
		r.stmt(s, fn)
	}
	r.pop()
}

func (r *rewriter) exprs(es []ast.Expr, fn int) {
	for i, e := range es {
		es[i] = r.expr(e, fn)
	}
}

func (r *rewriter) stmt(st ast.Stmt, fn int) {
	switch s := st.(type) {
	case *ast.AssignStmt:
		for i, e := range s.Lhs {
			if _, ok := e.(*ast.IdentExpr); !ok {
				s.Lhs[i] = r.expr(e, fn)
			}
		}
		r.exprs(s.Rhs, fn)
	case *ast.LocalAssignStmt:
		if len(s.Names) == 1 && len(s.Exprs) == 1 {
			if _, ok := s.Exprs[0].(*ast.FunctionExpr); ok {
				r.declare(s.Names...) // local function f: f is visible inside
			}
		}
		r.exprs(s.Exprs, fn)
		r.declare(s.Names...)
	case *ast.FuncCallStmt:
		s.Expr = r.expr(s.Expr, fn)
	case *ast.DoBlockStmt:
		r.block(s.Stmts, fn)
	case *ast.WhileStmt:
		s.Condition = r.expr(s.Condition, fn)
		r.block(s.Stmts, fn)
	case *ast.RepeatStmt:
		r.push(fn) // the condition sees the body's locals
		for _, b := range s.Stmts {
			r.stmt(b, fn)
		}
		s.Condition = r.expr(s.Condition, fn)
		r.pop()
	case *ast.IfStmt:
		s.Condition = r.expr(s.Condition, fn)
		r.block(s.Then, fn)
		r.block(s.Else, fn)
	case *ast.NumberForStmt:
		s.Init = forNumber(r.expr(s.Init, fn), "init")
		s.Limit = forNumber(r.expr(s.Limit, fn), "limit")
		if s.Step != nil {
			s.Step = forNumber(r.expr(s.Step, fn), "step")
		}
		r.push(fn)
		r.declare(s.Name)
		r.block(s.Stmts, fn)
		r.pop()
	case *ast.GenericForStmt:
		r.exprs(s.Exprs, fn)
		r.push(fn)
		r.declare(s.Names...)
		r.block(s.Stmts, fn)
		r.pop()
	case *ast.FuncDefStmt:
		if s.Name.Func != nil {
			if _, ok := s.Name.Func.(*ast.IdentExpr); !ok {
				s.Name.Func = r.expr(s.Name.Func, fn)
			}
		}
		if s.Name.Receiver != nil {
			s.Name.Receiver = r.expr(s.Name.Receiver, fn)
		}
		r.function(s.Func, fn, s.Name.Method != "")
	case *ast.ReturnStmt:
		r.exprs(s.Exprs, fn)
	}
}

func (r *rewriter) function(f *ast.FunctionExpr, outer int, method bool) {
	fn := outer + 1
	r.push(fn)
	if method {
		r.declare("self")
	}
	if f.ParList != nil {
		r.declare(f.ParList.Names...)
	}
	r.block(f.Stmts, fn)
	r.pop()
}

func (r *rewriter) expr(e ast.Expr, fn int) ast.Expr {
	switch x := e.(type) {
	case *ast.NumberExpr:
		x.Value = normalizeNumber(x.Value)
	case *ast.StringExpr:
		if strings.HasPrefix(x.Value, concatMarker) {
			r.clash = true
		}
	case *ast.AttrGetExpr:
		x.Object = r.expr(x.Object, fn)
		x.Key = r.expr(x.Key, fn)
	case *ast.TableExpr:
		for _, f := range x.Fields {
			if f.Key != nil {
				f.Key = r.expr(f.Key, fn)
			}
			f.Value = r.expr(f.Value, fn)
		}
	case *ast.FuncCallExpr:
		if x.Func != nil {
			x.Func = r.expr(x.Func, fn)
		}
		if x.Receiver != nil {
			x.Receiver = r.expr(x.Receiver, fn)
		}
		r.exprs(x.Args, fn)
	case *ast.LogicalOpExpr:
		x.Lhs, x.Rhs = r.expr(x.Lhs, fn), r.expr(x.Rhs, fn)
	case *ast.RelationalOpExpr:
		x.Lhs, x.Rhs = r.expr(x.Lhs, fn), r.expr(x.Rhs, fn)
	case *ast.ArithmeticOpExpr:
		x.Lhs, x.Rhs = r.expr(x.Lhs, fn), r.expr(x.Rhs, fn)
	case *ast.UnaryMinusOpExpr:
		x.Expr = r.expr(x.Expr, fn)
	case *ast.UnaryNotOpExpr:
		x.Expr = r.expr(x.Expr, fn)
	case *ast.UnaryLenOpExpr:
		x.Expr = r.expr(x.Expr, fn)
	case *ast.FunctionExpr:
		r.function(x, fn, false)
	case *ast.StringConcatOpExpr:
		return r.concat(x, fn)
	}
	return e
}

// concat rewrites one right-leaning chain a .. (b .. (c ...)).
func (r *rewriter) concat(x *ast.StringConcatOpExpr, fn int) ast.Expr {
	var ops []ast.Expr
	for cur := ast.Expr(x); ; {
		c, ok := cur.(*ast.StringConcatOpExpr)
		if !ok {
			ops = append(ops, cur)
			break
		}
		ops = append(ops, c.Lhs)
		cur = c.Rhs
	}
	literal := true
	descs := make([]string, len(ops))
	for i, op := range ops {
		descs[i] = r.describe(op)
		ops[i] = r.expr(op, fn)
		switch ops[i].(type) {
		case *ast.StringExpr, *ast.NumberExpr:
		default:
			literal = false
		}
	}
	if literal {
		var b strings.Builder
		for _, op := range ops {
			switch o := op.(type) {
			case *ast.StringExpr:
				b.WriteString(o.Value)
			case *ast.NumberExpr:
				f, _ := str2number(o.Value)
				b.WriteString(luaNumberString(f))
			}
		}
		s := &ast.StringExpr{Value: b.String()}
		s.SetLine(x.Line())
		s.SetLastLine(x.LastLine())
		return s
	}
	site := len(r.sites)
	r.sites = append(r.sites, descs)
	marker := &ast.StringExpr{Value: concatMarker + strconv.Itoa(site)}
	marker.SetLine(x.Line())
	marker.SetLastLine(x.LastLine())
	call := &ast.FuncCallExpr{Func: marker, Args: ops}
	call.SetLine(x.Line())
	call.SetLastLine(x.LastLine())
	return call
}

// forNumber wraps a numeric for's init, limit or step, unless it is a
// number literal, in a call that converts a numeric string to a number as
// Lua 5.1's OP_FORPREP does (for i = 1, ARGV[1]), where gopher-lua's
// refuses strings.
func forNumber(e ast.Expr, what string) ast.Expr {
	if _, ok := e.(*ast.NumberExpr); ok {
		return e
	}
	marker := &ast.StringExpr{Value: concatMarker + what}
	marker.SetLine(e.Line())
	marker.SetLastLine(e.LastLine())
	call := &ast.FuncCallExpr{Func: marker, Args: []ast.Expr{e}}
	call.SetLine(e.Line())
	call.SetLastLine(e.LastLine())
	return call
}

// forFuncs are the conversion functions of forNumber, by marker suffix.
var forFuncs = map[string]*lua.LFunction{
	"init":  forFunc("'for' initial value must be a number"),
	"limit": forFunc("'for' limit must be a number"),
	"step":  forFunc("'for' step must be a number"),
}

func forFunc(msg string) *lua.LFunction {
	return &lua.LFunction{IsG: true, Env: concatEnv, GFunction: func(L *lua.LState) int {
		f, ok := toNumber51(L.Get(1))
		if !ok {
			L.RaiseError("%s", msg)
		}
		L.Push(lua.LNumber(f))
		return 1
	}}
}

// describe is Lua 5.1's varinfo for an operand: "local 'x'",
// "global 'x'", "upvalue 'x'", "field 'x'" ("field '?'" when the key is
// not a string constant), or "" for temporaries.
func (r *rewriter) describe(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.IdentExpr:
		return r.kind(x.Value) + " '" + x.Value + "'"
	case *ast.AttrGetExpr:
		if k, ok := x.Key.(*ast.StringExpr); ok {
			return "field '" + k.Value + "'"
		}
		return "field '?'"
	}
	return ""
}

// normalizeNumber rewrites a number literal so that gopher-lua's compiler
// (strconv.ParseInt with base 0, then ParseFloat) reads the value Lua 5.1
// does: "010" is ten, not eight.
func normalizeNumber(s string) string {
	f, ok := str2number(s)
	if !ok {
		return s
	}
	if f == math.Trunc(f) && math.Abs(f) < 1<<63 {
		return strconv.FormatInt(int64(f), 10)
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// installConcat swaps the compiled placeholders of p (and its nested
// functions) for the concatenation functions of sites.
func installConcat(p *lua.FunctionProto, fns []*lua.LFunction) {
	for i, k := range p.Constants {
		if s, ok := k.(lua.LString); ok && strings.HasPrefix(string(s), concatMarker) {
			suffix := string(s[len(concatMarker):])
			if f := forFuncs[suffix]; f != nil {
				p.Constants[i] = f
			} else if n, err := strconv.Atoi(suffix); err == nil && n >= 0 && n < len(fns) {
				p.Constants[i] = fns[n]
			}
		}
	}
	for _, c := range p.FunctionPrototypes {
		installConcat(c, fns)
	}
}

// concatFuncs builds one concatenation function per site.
func concatFuncs(sites [][]string) []*lua.LFunction {
	fns := make([]*lua.LFunction, len(sites))
	for i, descs := range sites {
		fns[i] = &lua.LFunction{IsG: true, Env: concatEnv, GFunction: concatFunc(descs)}
	}
	return fns
}

// isStrNum reports whether v is a string or a number (what .. joins).
func isStrNum(v lua.LValue) bool {
	switch v.(type) {
	case lua.LString, lua.LNumber:
		return true
	}
	return false
}

// concatFunc is luaV_concat for one chain; descs name its operands.
// It may be called by any number of Lua states at once.
func concatFunc(descs []string) lua.LGFunction {
	return func(L *lua.LState) int {
		n := L.GetTop()
		size, simple := 0, true
		for i := 1; i <= n; i++ {
			switch a := L.Get(i).(type) {
			case lua.LString:
				size += len(a)
			case lua.LNumber:
				size += 24
			default:
				simple = false
			}
		}
		if simple {
			L.Push(lua.LString(joinLua(L, func(i int) lua.LValue { return L.Get(i + 1) }, 0, n, size)))
			return 1
		}
		vals := make([]lua.LValue, n)
		for i := range vals {
			vals[i] = L.Get(i + 1)
		}
		total, last := n, n-1
		for total > 1 {
			top := last + 1
			a, b := vals[top-2], vals[top-1]
			used := 2
			switch {
			case !isStrNum(a) || !isStrNum(b):
				mm := L.GetMetaField(a, "__concat")
				if mm == lua.LNil {
					mm = L.GetMetaField(b, "__concat")
				}
				if mm == lua.LNil {
					bad := top - 2
					if isStrNum(a) {
						bad = top - 1
					}
					concatError(L, descs, bad, vals[bad])
				}
				L.Push(mm)
				L.Push(a)
				L.Push(b)
				L.Call(2, 1)
				vals[top-2] = L.Get(-1)
				L.Pop(1)
			default:
				for used < total && isStrNum(vals[top-used-1]) {
					used++
				}
				size := 0
				for i := top - used; i < top; i++ {
					if s, ok := vals[i].(lua.LString); ok {
						size += len(s)
					} else {
						size += 24
					}
				}
				vals[top-used] = lua.LString(joinLua(L, func(i int) lua.LValue { return vals[i] }, top-used, top, size))
			}
			total -= used - 1
			last -= used - 1
		}
		L.Push(vals[0])
		return 1
	}
}

// joinLua concatenates get(from) .. get(to-1), all strings or numbers.
func joinLua(L *lua.LState, get func(int) lua.LValue, from, to, size int) string {
	if size > maxStringRep {
		L.RaiseError("string length overflow")
	}
	b := make([]byte, 0, size)
	for i := from; i < to; i++ {
		switch a := get(i).(type) {
		case lua.LString:
			b = append(b, a...)
		case lua.LNumber:
			b = appendLuaNumber(b, float64(a))
		}
		if len(b) > maxStringRep {
			L.RaiseError("string length overflow")
		}
	}
	return string(b)
}

// concatError raises luaG_concaterror's text for operand i.
func concatError(L *lua.LState, descs []string, i int, v lua.LValue) {
	msg := "attempt to concatenate a " + v.Type().String() + " value"
	if i < len(descs) && descs[i] != "" {
		msg = "attempt to concatenate " + descs[i] + " (a " + v.Type().String() + " value)"
	}
	L.RaiseError("%s", msg)
}
