package script

import (
	"bytes"
	"io"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"
)

// fakeHost answers redis.call from a table of canned replies keyed by the
// lower-cased command name, and records the arguments it was given.
type fakeHost struct {
	replies  map[string]string
	calls    [][]string
	flags    []CallFlags
	noRecord bool // benchmarks
}

func (h *fakeHost) Call(args [][]byte, flags CallFlags) []byte {
	if h.noRecord {
		return []byte(h.replies[strings.ToLower(string(args[0]))])
	}
	rec := make([]string, len(args))
	for i, a := range args {
		rec[i] = string(a)
	}
	h.calls = append(h.calls, rec)
	h.flags = append(h.flags, flags)
	name := strings.ToLower(rec[0])
	if name == "echo" && len(rec) == 2 { // echoes raw RESP back
		return []byte(rec[1])
	}
	if r, ok := h.replies[name]; ok {
		return []byte(r)
	}
	return []byte("-ERR Unknown Redis command called from script\r\n")
}

var cannedReplies = map[string]string{
	"ping":        "+PONG\r\n",
	"get":         "$3\r\nbar\r\n",
	"nil":         "$-1\r\n",
	"incr":        ":42\r\n",
	"cl.throttle": "*5\r\n:0\r\n:11\r\n:10\r\n:-1\r\n:6000\r\n",
	"wrongtype":   "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
	"noscript":    "-ERR This Redis command is not allowed from script\r\n",
}

func newTestEngine(t testing.TB, mods ...func(*Config)) (*Engine, *fakeHost) {
	t.Helper()
	h := &fakeHost{replies: cannedReplies}
	cfg := Config{
		NewHost: func() Host { return h },
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	for _, m := range mods {
		m(&cfg)
	}
	return New(cfg), h
}

func strs(ss ...string) [][]byte {
	out := make([][]byte, len(ss))
	for i, s := range ss {
		out[i] = []byte(s)
	}
	return out
}

// evalCase is one EVAL with its exact RESP reply.
type evalCase struct {
	body       string
	keys, args []string
	want       string
}

func runEvalCases(t *testing.T, e *Engine, opt Options, cases []evalCase) {
	t.Helper()
	for i, tc := range cases {
		got, err := e.Eval(nil, []byte(tc.body), strs(tc.keys...), strs(tc.args...), opt)
		if err != nil {
			t.Errorf("case %d: %q: error %v", i, tc.body, err)
			continue
		}
		want := strings.ReplaceAll(tc.want, "SHA", SHA1Hex([]byte(tc.body)))
		if string(got) != want {
			t.Errorf("case %d: %q\n got: %q\nwant: %q", i, tc.body, got, want)
		}
	}
}

func TestLuaToRESP(t *testing.T) {
	e, _ := newTestEngine(t)
	runEvalCases(t, e, Options{}, []evalCase{
		{body: "return 1", want: ":1\r\n"},
		{body: "return 3.99", want: ":3\r\n"},
		{body: "return -3.99", want: ":-3\r\n"},
		{body: "return 'x'", want: "$1\r\nx\r\n"},
		{body: "return ''", want: "$0\r\n\r\n"},
		{body: "return true", want: ":1\r\n"},
		{body: "return false", want: "$-1\r\n"},
		{body: "return nil", want: "$-1\r\n"},
		{body: "return", want: "$-1\r\n"},
		{body: "return {1, 'a', {2, false}}", want: "*3\r\n:1\r\n$1\r\na\r\n*2\r\n:2\r\n$-1\r\n"},
		{body: "return {1, 2, nil, 4}", want: "*2\r\n:1\r\n:2\r\n"},
		{body: "return {}", want: "*0\r\n"},
		{body: "return {ok='fine'}", want: "+fine\r\n"},
		{body: "return {err='My Error'}", want: "-My Error\r\n"},
		{body: "return {err='a\\r\\nb'}", want: "-a  b\r\n"},
		{body: "return {err='x', ok='y'}", want: "-x\r\n"},
		{body: "return {ok=1, 5}", want: "*1\r\n:5\r\n"},
		{body: "return redis.status_reply('OK')", want: "+OK\r\n"},
		{body: "return redis.error_reply('My Error')", want: "-My Error\r\n"},
		{body: "return redis.error_reply('oops')", want: "-ERR oops\r\n"},
		{body: "return redis.error_reply('-NOPE x')", want: "-NOPE x\r\n"},
		{body: "return redis.error_reply(1)", want: "-ERR wrong number or type of arguments\r\n"},
		{body: "return redis.status_reply()", want: "-ERR wrong number or type of arguments\r\n"},
		{body: "return {double=1.5}", want: "$3\r\n1.5\r\n"},
		{body: "return {map={a=1}}", want: "*2\r\n$1\r\na\r\n:1\r\n"},
		{body: "return {set={a=true}}", want: "*1\r\n$1\r\na\r\n"},
		{body: "return {big_number='123'}", want: "$3\r\n123\r\n"},
		{body: "return {verbatim_string={format='txt', string='hi'}}", want: "$2\r\nhi\r\n"},
		{body: "return KEYS[1] .. ARGV[2]", keys: []string{"k"}, args: []string{"a", "b"}, want: "$2\r\nkb\r\n"},
		{body: "return {#KEYS, #ARGV}", keys: []string{"k"}, args: []string{"a", "b"}, want: "*2\r\n:1\r\n:2\r\n"},
		{body: "return redis.sha1hex('')", want: "$40\r\nda39a3ee5e6b4b0d3255bfef95601890afd80709\r\n"},
		{body: "return redis.REDIS_VERSION", want: "$5\r\n7.2.4\r\n"},
		{body: "return redis.REDIS_VERSION_NUM", want: ":459268\r\n"},
		{body: "local t = {}; t[1] = t; return t", want: strings.Repeat("*1\r\n", maxReplyDepth) + "-ERR reached lua stack limit\r\n"},
	})
}

func TestLuaToRESP3(t *testing.T) {
	e, _ := newTestEngine(t)
	runEvalCases(t, e, Options{RESP3: true}, []evalCase{
		{body: "return nil", want: "_\r\n"},
		{body: "return false", want: "_\r\n"},
		{body: "return true", want: ":1\r\n"},
		{body: "redis.setresp(3); return false", want: "#f\r\n"},
		{body: "redis.setresp(3); return true", want: "#t\r\n"},
		{body: "return {double=1.5}", want: ",1.5\r\n"},
		{body: "return {map={a=1}}", want: "%1\r\n$1\r\na\r\n:1\r\n"},
		{body: "return {set={a=true}}", want: "~1\r\n$1\r\na\r\n"},
		{body: "return {big_number='123'}", want: "(123\r\n"},
		{body: "return {verbatim_string={format='txt', string='hi'}}", want: "=6\r\ntxt:hi\r\n"},
	})
	runEvalCases(t, e, Options{}, []evalCase{
		{body: "redis.setresp(3); return false", want: ":0\r\n"},
	})
}

func TestRESPToLua(t *testing.T) {
	e, h := newTestEngine(t)
	runEvalCases(t, e, Options{}, []evalCase{
		{body: "return redis.call('ping')", want: "+PONG\r\n"},
		{body: "return type(redis.call('ping'))", want: "$5\r\ntable\r\n"},
		{body: "return redis.call('ping').ok", want: "$4\r\nPONG\r\n"},
		{body: "return redis.call('GET', 'foo')", want: "$3\r\nbar\r\n"},
		{body: "return redis.call('nil') == false", want: ":1\r\n"},
		{body: "return redis.call('incr', 'x') + 1", want: ":43\r\n"},
		{body: "return redis.call('cl.throttle', KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4])",
			keys: []string{"k"}, args: []string{"10", "10", "60", "1"},
			want: "*5\r\n:0\r\n:11\r\n:10\r\n:-1\r\n:6000\r\n"},
		{body: "local r = redis.pcall('wrongtype'); return {type(r), r.err}",
			want: "*2\r\n$5\r\ntable\r\n$65\r\nWRONGTYPE Operation against a key holding the wrong kind of value\r\n"},
		{body: "return redis.pcall('wrongtype')", want: "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"},
		{body: "return redis.pcall('nosuch')", want: "-ERR Unknown Redis command called from script\r\n"},
		{body: "return redis.call('echo', '*-1\\r\\n')", want: "$-1\r\n"},
		{body: "return redis.call('echo', '_\\r\\n') == nil", want: ":1\r\n"},
		{body: "return redis.call('echo', '#t\\r\\n')", want: ":1\r\n"},
		{body: "return redis.call('echo', ',2.5\\r\\n').double * 2", want: ":5\r\n"},
		{body: "return redis.call('echo', '%1\\r\\n+a\\r\\n:1\\r\\n')", want: "*2\r\n+a\r\n:1\r\n"},
		{body: "return redis.call('echo', '~2\\r\\n$1\\r\\na\\r\\n$1\\r\\nb\\r\\n').set.b", want: ":1\r\n"},
		{body: "return redis.call('echo', '=7\\r\\ntxt:abc\\r\\n').verbatim_string.string", want: "$3\r\nabc\r\n"},
		{body: "return redis.call('echo', '(12345678901234567890\\r\\n').big_number", want: "$20\r\n12345678901234567890\r\n"},
		{body: "return redis.call('echo', '|1\\r\\n+k\\r\\n+v\\r\\n:7\\r\\n')", want: ":7\r\n"},
		{body: "return redis.call('echo', '*2\\r\\n*1\\r\\n:1\\r\\n$-1\\r\\n')", want: "*2\r\n*1\r\n:1\r\n$-1\r\n"},
	})
	// Numbers become arguments through "%.17g".
	h.calls = nil
	runEvalCases(t, e, Options{}, []evalCase{
		{body: "return redis.call('ping', 1, 1.5, 0.1, -0, 1e20, 2^53)", want: "+PONG\r\n"},
	})
	want := []string{"ping", "1", "1.5", "0.10000000000000001", "-0", "1e+20", "9007199254740992"}
	if got := h.calls[0]; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("args %q, want %q", got, want)
	}
}

func TestScriptErrors(t *testing.T) {
	e, _ := newTestEngine(t)
	runEvalCases(t, e, Options{}, []evalCase{
		{body: "return redis.call('nosuch')",
			want: "-ERR Unknown Redis command called from script script: SHA, on @user_script:1.\r\n"},
		{body: "\n\nreturn redis.call('wrongtype')",
			want: "-WRONGTYPE Operation against a key holding the wrong kind of value script: SHA, on @user_script:3.\r\n"},
		{body: "return redis.call('noscript')",
			want: "-ERR This Redis command is not allowed from script script: SHA, on @user_script:1.\r\n"},
		{body: "error('boom')", want: "-ERR user_script:1: boom script: SHA, on @user_script:1.\r\n"},
		{body: "local x = 1\nerror({err='MY own'})", want: "-MY own script: SHA, on @user_script:2.\r\n"},
		{body: "error(redis.error_reply('X y'))", want: "-X y script: SHA, on @user_script:1.\r\n"},
		{body: "return redis.call()",
			want: "-ERR Please specify at least one argument for this redis lib call script: SHA, on @user_script:1.\r\n"},
		{body: "return redis.call('get', {})",
			want: "-ERR Lua redis lib command arguments must be strings or integers script: SHA, on @user_script:1.\r\n"},
		{body: "return redis.pcall('get', nil)", want: "-ERR Lua redis lib command arguments must be strings or integers\r\n"},
		{body: "x = 5", want: "-ERR user_script:1: Attempt to modify a readonly table script: SHA, on @user_script:1.\r\n"},
		{body: "return undefinedvar",
			want: "-ERR user_script:1: Script attempted to access nonexistent global variable 'undefinedvar' script: SHA, on @user_script:1.\r\n"},
		{body: "redis.call = nil", want: "-ERR user_script:1: Attempt to modify a readonly table script: SHA, on @user_script:1.\r\n"},
		{body: "string.x = 1", want: "-ERR user_script:1: Attempt to modify a readonly table script: SHA, on @user_script:1.\r\n"},
		{body: "rawset(_G, 'x', 1)", want: "-ERR user_script:1: Attempt to modify a readonly table script: SHA, on @user_script:1.\r\n"},
		{body: "redis.log()", want: "-ERR redis.log() requires two arguments or more. script: SHA, on @user_script:1.\r\n"},
		{body: "redis.log('x', 'y')", want: "-ERR First argument must be a number (log level). script: SHA, on @user_script:1.\r\n"},
		{body: "redis.log(9, 'y')", want: "-ERR Invalid debug level. script: SHA, on @user_script:1.\r\n"},
		{body: "redis.setresp(4)", want: "-ERR RESP version must be 2 or 3. script: SHA, on @user_script:1.\r\n"},
		{body: "redis.sha1hex()", want: "-ERR wrong number of arguments script: SHA, on @user_script:1.\r\n"},
		{body: "local ok, e = pcall(redis.call, 'nosuch'); return e",
			want: "$44\r\nERR Unknown Redis command called from script\r\n"},
		{body: "local ok, e = pcall(error, 'x', 0); return e", want: "$1\r\nx\r\n"},
		{body: "return pcall(function() return 1, 2 end)", want: ":1\r\n"},
	})
	for _, body := range []string{"return nil + 1", "local t = nil; return t.x"} {
		got, _ := e.Eval(nil, []byte(body), nil, nil, Options{})
		suffix := " script: " + SHA1Hex([]byte(body)) + ", on @user_script:1.\r\n"
		if !bytes.HasPrefix(got, []byte("-ERR user_script:1: ")) || !bytes.HasSuffix(got, []byte(suffix)) {
			t.Errorf("%q: got %q", body, got)
		}
	}
}

func TestSandbox(t *testing.T) {
	e, _ := newTestEngine(t)
	for _, name := range []string{"os", "io", "dofile", "loadfile", "print", "require", "module", "package", "debug", "cjson", "bit", "_GOPHER_LUA_VERSION"} {
		body := "return " + name
		got, _ := e.Eval(nil, []byte(body), nil, nil, Options{})
		want := "-ERR user_script:1: Script attempted to access nonexistent global variable '" + name + "'"
		if !strings.HasPrefix(string(got), want) {
			t.Errorf("%s: got %q", name, got)
		}
	}
	runEvalCases(t, e, Options{}, []evalCase{
		{body: "return type(loadstring)", want: "$8\r\nfunction\r\n"},
		{body: "return loadstring('return 1 + 1')()", want: ":2\r\n"},
		{body: "return getmetatable('')", want: "*0\r\n"}, // Redis: a read-only table
		{body: "return getmetatable('').__index == string", want: ":1\r\n"},
		{body: "getmetatable('').__index = nil", want: "-ERR user_script:1: Attempt to modify a readonly table script: SHA, on @user_script:1.\r\n"},
		{body: "return getmetatable(_G)", want: "$-1\r\n"},
		{body: "return (pcall(setmetatable, _G, {}))", want: "$-1\r\n"},
		{body: "return (pcall(setmetatable, 1, {}))", want: "$-1\r\n"},
		{body: "return collectgarbage('count')", want: ":0\r\n"},
		{body: "return string.format('%d-%s', 1, 'x')", want: "$3\r\n1-x\r\n"},
		{body: "return ('abc'):upper()", want: "$3\r\nABC\r\n"},
		{body: "return math.floor(2.5)", want: ":2\r\n"},
		{body: "return table.concat({'a','b'}, ',')", want: "$3\r\na,b\r\n"},
		{body: "return _G.KEYS[1]", keys: []string{"k"}, want: "$1\r\nk\r\n"},
		{body: "return (pcall(string.rep, 'x', 2^30))", want: "$-1\r\n"},
		{body: "return #string.rep('x', 1e12)", want: ":0\r\n"}, // (int)1e12 < 0, as in Lua 5.1
		{body: "return redis.replicate_commands()", want: ":1\r\n"},
	})
}

// Nothing a script does outlives its run, though Lua states are reused.
func TestNoLeakBetweenRuns(t *testing.T) {
	e, _ := newTestEngine(t)
	ro := "-ERR user_script:1: Attempt to modify a readonly table script: SHA, on @user_script:1.\r\n"
	runEvalCases(t, e, Options{}, []evalCase{
		{body: "table.insert(_G, 'leak')", want: ro},
		{body: "table.insert(string, 'leak')", want: ro},
		{body: "table.remove(redis)", want: ro},
		{body: "rawset(math, 'pi', 3)", want: ro},
		{body: "getfenv(0).x = 1", want: "-ERR user_script:1: Attempt to modify a readonly table script: SHA, on @user_script:1.\r\n"},
		{body: "getfenv(tostring).KEYS = 1; return 1", want: ":1\r\n"},
		{body: "return {rawget(_G, 1), rawget(string, 1), math.pi > 3.14}", want: "*0\r\n"},
		{body: "setfenv(0, {}); return 1", want: ":1\r\n"},
		{body: "setfenv(1, {}); return 1", want: ":1\r\n"},
		{body: "setfenv(1, {}); return 1", want: ":1\r\n"},
		{body: "return type(loadstring('return redis')())", want: "$5\r\ntable\r\n"},
		{body: "KEYS[5] = 'x'; KEYS.foo = 1; setmetatable(ARGV, {__index = function() return 'z' end}); return 1",
			keys: []string{"a"}, want: ":1\r\n"},
		{body: "return {#KEYS, KEYS.foo, ARGV[2]}", keys: []string{"a"}, args: []string{"b"}, want: "*1\r\n:1\r\n"},
		{body: "KEYS = nil; return 1", want: ":1\r\n"},
		{body: "return #KEYS", keys: []string{"a", "b"}, want: ":2\r\n"},
		{body: "return #KEYS", keys: []string{"a"}, want: ":1\r\n"},
	})
}

func TestTimeLimit(t *testing.T) {
	e, _ := newTestEngine(t, func(c *Config) { c.TimeLimit = 50 * time.Millisecond })
	for _, body := range []string{
		"while true do end",
		"while true do pcall(function() while true do end end) end",
		"local i = 0\nwhile true do i = i + 1 end",
	} {
		start := time.Now()
		got, err := e.Eval(nil, []byte(body), nil, nil, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(got), "-ERR script timed out after 50ms script: "+SHA1Hex([]byte(body))+", on @user_script:") {
			t.Errorf("%q: got %q", body, got)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("%q: stopped after %v", body, d)
		}
		// The state is still usable.
		runEvalCases(t, e, Options{}, []evalCase{{body: "return 1", want: ":1\r\n"}})
	}
}

func TestReadOnly(t *testing.T) {
	e, h := newTestEngine(t)
	h.flags = nil
	runEvalCases(t, e, Options{ReadOnly: true}, []evalCase{{body: "return redis.call('ping')", want: "+PONG\r\n"}})
	if h.flags[0]&ReadOnly == 0 {
		t.Error("EVAL_RO did not ask the host for read-only")
	}
	if _, err := e.Eval(nil, []byte("#!lua\nreturn 1"), nil, nil, Options{ReadOnly: true}); err != ErrWriteScriptRO {
		t.Errorf("shebang without no-writes under _RO: %v", err)
	}
	h.flags = nil
	runEvalCases(t, e, Options{}, []evalCase{
		{body: "#!lua flags=no-writes,allow-stale\nreturn redis.call('ping')", want: "+PONG\r\n"},
		{body: "#!lua flags=no-writes\n\nerror('x')", want: "-ERR user_script:3: x script: SHA, on @user_script:3.\r\n"},
	})
	if h.flags[0]&ReadOnly == 0 {
		t.Error("no-writes script did not ask the host for read-only")
	}
}

// TestAllowOOM: the host is told a script may write over the memory bound
// (AllowOOM) exactly when its shebang says allow-oom or no-writes, and a
// shebang that says neither is refused with ErrOOM before it runs when
// Options.OverMemory says so (Redis's scriptVerifyOOM and its refusal of
// such an EVAL at processCommand); a script without a shebang runs (its
// host refuses its denyoom commands one by one).
func TestAllowOOM(t *testing.T) {
	e, h := newTestEngine(t)
	over := func() bool { return true }
	for _, c := range []struct {
		body  string
		allow bool
	}{
		{"return redis.call('ping')", false},
		{"#!lua flags=allow-oom\nreturn redis.call('ping')", true},
		{"#!lua flags=no-writes\nreturn redis.call('ping')", true},
		{"#!lua flags=allow-stale,allow-oom\nlocal x = 1\nreturn redis.call('ping')", true},
	} {
		h.flags = nil
		out, err := e.Eval(nil, []byte(c.body), nil, nil, Options{OverMemory: over})
		if err != nil || string(out) != "+PONG\r\n" {
			t.Fatalf("%q: %q, %v", c.body, out, err)
		}
		if len(h.flags) != 1 || (h.flags[0]&AllowOOM != 0) != c.allow {
			t.Errorf("%q: host flags %v, want AllowOOM %v", c.body, h.flags, c.allow)
		}
	}
	h.calls = nil
	if _, err := e.Eval(nil, []byte("#!lua flags=\nreturn redis.call('ping')"), nil, nil, Options{OverMemory: over}); err != ErrOOM {
		t.Errorf("shebang without allow-oom over the bound: %v, want ErrOOM", err)
	}
	if len(h.calls) != 0 {
		t.Errorf("a refused script ran %v", h.calls)
	}
	if out, err := e.Eval(nil, []byte("#!lua flags=\nreturn 1"), nil, nil, Options{OverMemory: func() bool { return false }}); err != nil || string(out) != ":1\r\n" {
		t.Errorf("under the bound: %q, %v", out, err)
	}
}

func TestLoadErrors(t *testing.T) {
	e, _ := newTestEngine(t)
	for body, want := range map[string]string{
		"#!lua":                       "Invalid script shebang",
		"#!python\nreturn 1":          "Unexpected engine in script shebang: #!python",
		"#!lua flags=bogus\nreturn 1": "Unexpected flag in script shebang: bogus",
		"#!lua x=1\nreturn 1":         "Unknown lua shebang option: x=1",
		"return 1 +":                  "Error compiling script (new function): user_script:1: ",
		"local x = \n\n  = 2":         "Error compiling script (new function): user_script:3: ",
	} {
		_, err := e.Eval(nil, []byte(body), nil, nil, Options{})
		le, ok := err.(*LoadError)
		if !ok || !strings.HasPrefix(le.Msg, want) {
			t.Errorf("%q: got %v, want %q", body, err, want)
		}
	}
	if e.Len() != 0 {
		t.Errorf("failed scripts were cached: %d", e.Len())
	}
}

func TestCache(t *testing.T) {
	e, _ := newTestEngine(t, func(c *Config) { c.MaxEvalScripts = 2 })
	body := []byte("return 'cached'")
	sha := SHA1Hex(body)
	if _, err := e.EvalSHA(nil, []byte(sha), nil, nil, Options{}); err != ErrNoScript {
		t.Fatalf("EVALSHA before EVAL: %v", err)
	}
	if _, err := e.Eval(nil, body, nil, nil, Options{}); err != nil {
		t.Fatal(err)
	}
	got, err := e.EvalSHA(nil, []byte(strings.ToUpper(sha)), nil, nil, Options{})
	if err != nil || string(got) != "$6\r\ncached\r\n" {
		t.Fatalf("EVALSHA (upper case): %q %v", got, err)
	}
	if !e.Exists([]byte(sha)) || e.Exists([]byte("x")) {
		t.Error("Exists")
	}
	// Two more EVAL scripts evict the least recently used one.
	e.Eval(nil, []byte("return 2"), nil, nil, Options{})
	e.Eval(nil, []byte("return 3"), nil, nil, Options{})
	if e.Exists([]byte(sha)) {
		t.Error("EVAL script not evicted")
	}
	// SCRIPT LOAD pins.
	loaded, err := e.Load(body)
	if err != nil || loaded != sha {
		t.Fatalf("Load: %q %v", loaded, err)
	}
	for i := 0; i < 5; i++ {
		e.Eval(nil, []byte("return "+strings.Repeat("1", i+1)), nil, nil, Options{})
	}
	if !e.Exists([]byte(sha)) {
		t.Error("loaded script evicted")
	}
	e.Flush()
	if e.Exists([]byte(sha)) || e.Len() != 0 {
		t.Error("Flush left scripts")
	}
}

func TestErrorText(t *testing.T) {
	for in, want := range map[string]string{
		"-ERR x":        "ERR x",
		"-WRONGTYPE y":  "WRONGTYPE y",
		"-NOSPACE":      "ERR NOSPACE",
		"plain text":    "ERR plain text",
		"-CODE msg\r\n": "CODE msg",
	} {
		if got := errorText(in); got != want {
			t.Errorf("errorText(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestPoolConcurrency runs scripts from many goroutines (the server
// serialises them, but the engine must not rely on that).
func TestPoolConcurrency(t *testing.T) {
	e := New(Config{NewHost: func() Host { return &fakeHost{replies: cannedReplies} }})
	done := make(chan struct{})
	for g := 0; g < 8; g++ {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := 0; i < 200; i++ {
				got, err := e.Eval(nil, []byte("return redis.call('incr', KEYS[1])"), strs("k"), nil, Options{})
				if err != nil || string(got) != ":42\r\n" {
					t.Errorf("got %q %v", got, err)
					return
				}
			}
		}()
	}
	for g := 0; g < 8; g++ {
		<-done
	}
}

func BenchmarkEngineEvalSpring(b *testing.B) {
	e, h := newTestEngine(b)
	h.noRecord = true
	body := []byte("return redis.call('cl.throttle', KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4])")
	keys, args := strs("user:1"), strs("10", "10", "60", "1")
	var out []byte
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		out, _ = e.Eval(out[:0], body, keys, args, Options{})
	}
}

func TestAtMostOneCommand(t *testing.T) {
	for body, want := range map[string]bool{
		"return redis.call('cl.throttle', KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4])": true,
		"return redis.pcall('get', KEYS[1])":                                            true,
		"local r = redis.call('get', KEYS[1]) return r":                                 true,
		"redis.call('set', KEYS[1], ARGV[1] .. 'x') return 1":                           true,
		"local r = redis.call('incr', 'k') return {r, r * 2, #KEYS, 'x'}":               true,
		"return 1":                      true,
		"return KEYS[1] .. ARGV[1]":     true,
		"return {1, 2, {3}}":            true,
		"local t = {} t.x = 1 return t": true,

		"redis.call('get', 'a') return redis.call('get', 'b')":            false,
		"local c = redis.call return c('get', 'a')":                       false, // MOVE breaks the pattern: conservative
		"return tostring(1)":                                              false,
		"return pcall(redis.call, 'get', 'a')":                            false,
		"for i = 1, 2 do redis.call('incr', 'a') end":                     false,
		"if KEYS[1] then return redis.call('get', KEYS[1]) end":           false,
		"local f = function() return 1 end return redis.call('get', f())": false,
		"local r = redis; return r.call('get', 'a')":                      true,
		"redis = nil return redis.call('get', 'a')":                       true, // SETGLOBAL fails at run time
		"return redis.call(redis.call('get', 'a'))":                       false,
		"return string.gsub('a b', '%w', redis.call)":                     false,
		"return redis.call('get', KEYS[1]), redis.call('get', KEYS[2])":   false,
	} {
		s, err := compile(body)
		if err != nil {
			t.Fatalf("%q: %v", body, err)
		}
		if s.oneCommand != want {
			t.Errorf("%q: oneCommand = %v, want %v\n%s", body, s.oneCommand, want, s.proto)
		}
	}
}

// TestDirectMatchesVM runs single-call scripts both ways, the direct path
// and the Lua VM, over replies of every shape, and wants the same bytes.
func TestDirectMatchesVM(t *testing.T) {
	direct, hd := newTestEngine(t)
	viaVM, hv := newTestEngine(t)
	viaVM.noDirect = true
	defer func() { // and the same commands, with the same flags
		if !reflect.DeepEqual(hd.calls, hv.calls) || !reflect.DeepEqual(hd.flags, hv.flags) {
			t.Errorf("the hosts saw different calls: %d/%d calls", len(hd.calls), len(hv.calls))
		}
	}()
	bodies := []string{
		"return redis.call('echo', ARGV[1])",
		"return redis.pcall('echo', ARGV[1])",
		"return redis.call('ECHO', ARGV[1])",
		"\n\nreturn redis.call('echo', ARGV[1])",
		"#!lua flags=no-writes\nreturn redis.call('echo', ARGV[1])",
		"return redis.call('cl.throttle', KEYS[1], ARGV[2], ARGV[3], '60', ARGV[1])",
		"return redis.call('nosuch', KEYS[1])",
		"return redis.call('echo', KEYS[2])", // missing key: the VM path
	}
	replies := []string{
		":0\r\n", ":-5\r\n", ":1023\r\n", ":123456789\r\n", ":9007199254740993\r\n",
		":9223372036854775807\r\n", ":-9223372036854775808\r\n", ":9007199254740992\r\n", ":-9007199254740993\r\n",
		":+5\r\n", ":007\r\n", ":-0\r\n", ":-12\r\n", ":00\r\n", ":-\r\n", ":\r\n",
		":999999999999999\r\n", ":-999999999999999\r\n", ":1000000000000000\r\n", ":12345678901234567\r\n",
		"$3\r\nabc\r\n", "$0\r\n\r\n", "$-1\r\n", "*-1\r\n", "*0\r\n",
		"*3\r\n:1\r\n$-1\r\n*2\r\n+OK\r\n-ERR x\r\n", "*2\r\n*-1\r\n-NOSPACE\r\n",
		"+OK\r\n", "+\r\n", "-ERR boom\r\n", "-WRONGTYPE bad thing\r\n", "-NOSPACE\r\n", "-\r\n",
		"_\r\n", "#t\r\n", "#f\r\n", ",1.5\r\n", "(123\r\n", "=7\r\ntxt:abc\r\n",
		"%1\r\n+a\r\n:1\r\n", "~1\r\n$1\r\na\r\n", "*2\r\n_\r\n:1\r\n", "*2\r\n:1\r\n_\r\n",
		"|1\r\n+k\r\n+v\r\n:7\r\n",
		"", "*2\r\n:1\r\n", ":x\r\n", "$5\r\nab\r\n", "?\r\n", ":1\r\nextra",
	}
	for _, body := range bodies {
		s, err := compile(body)
		if err != nil {
			t.Fatal(err)
		}
		if s.direct == nil {
			t.Errorf("%q: not recognised as a direct call", body)
		}
		for _, reply := range replies {
			for _, opt := range []Options{{}, {RESP3: true}, {ReadOnly: true}} {
				keys, args := strs("k1"), strs(reply, "10", "20")
				a, errA := direct.Eval(nil, []byte(body), keys, args, opt)
				b, errB := viaVM.Eval(nil, []byte(body), keys, args, opt)
				if string(a) != string(b) || errA != errB {
					t.Errorf("%q, reply %q, %+v:\ndirect: %q %v\n    vm: %q %v", body, reply, opt, a, errA, b, errB)
				}
			}
		}
	}
	for _, body := range []string{
		"return redis.call('echo', 1)",
		"return redis.call('echo', KEYS[1] .. 'x')",
		"return redis.call('echo', KEYS.x)",
		"return redis.call('echo', KEYS[1.5])",
		"local r = redis.call('echo', KEYS[1]) return r",
		"return redis.call('echo', ARGV[1]), 1",
		"return redis.call(ARGV[1])",
		"redis.call('echo', ARGV[1])",
		"return redis.call('echo', ARGV[1])\nreturn",
	} {
		s, err := compile(body)
		if err != nil {
			continue
		}
		if s.direct != nil {
			t.Errorf("%q: wrongly recognised as a direct call", body)
		}
	}
}
