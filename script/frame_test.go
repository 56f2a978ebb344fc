package script

import (
	"strings"
	"testing"

	lua "github.com/yuin/gopher-lua"
)

// TestResultsWanted: resultsWanted finds gopher-lua's frame layout and
// reads, for each way of calling a Go function, how many results the
// caller keeps.
func TestResultsWanted(t *testing.T) {
	if !frameLayout.ok {
		t.Fatal("gopher-lua's LState.currentFrame / callFrame.NRet not found: discarded replies are converted again")
	}
	L := lua.NewState()
	defer L.Close()
	var got []int
	L.SetGlobal("f", L.NewFunction(func(L *lua.LState) int {
		got = append(got, resultsWanted(L))
		return 0
	}))
	for code, want := range map[string][]int{
		"f()":                                   {0},
		"local a = f()":                         {1},
		"local a, b, c = f()":                   {3},
		"return f()":                            {lua.MultRet}, // the chunk is called for all its results
		"local t = {f()}":                       {lua.MultRet},
		"local t = {f(), 1}":                    {1},
		"pcall(f)":                              {lua.MultRet},
		"local function g() return f() end g()": {0}, // a tail call wants what its caller wants
		"local function g() return f() end local x = g()": {1},
		"for i = 1, 2 do f() end":                         {0, 0},
		"if f() then end":                                 {1},
	} {
		got = got[:0]
		if err := L.DoString(code); err != nil {
			t.Fatalf("%q: %v", code, err)
		}
		if len(got) != len(want) {
			t.Errorf("%q: %v, want %v", code, got, want)
			continue
		}
		for i := range got {
			if got[i] != want[i] {
				t.Errorf("%q: %v, want %v", code, got, want)
				break
			}
		}
	}
}

// TestDiscardedReplies: a redis.call or redis.pcall whose reply the script
// throws away behaves as before (an error reply still raises from
// redis.call and not from redis.pcall; a kept reply is still converted)
// and allocates nothing for a status or integer reply.
func TestDiscardedReplies(t *testing.T) {
	e, h := newTestEngine(t)
	runEvalCases(t, e, Options{}, []evalCase{
		{body: "redis.call('ping') redis.call('incr', 'k') return 1", want: ":1\r\n"},
		{body: "redis.pcall('wrongtype') return 2", want: ":2\r\n"},
		{body: "local r = redis.call('ping') return r", want: "+PONG\r\n"},
		{body: "local r = redis.call('incr', 'k') return r", want: ":42\r\n"},
		{body: "redis.call('wrongtype') return 3",
			want: "-WRONGTYPE Operation against a key holding the wrong kind of value script: SHA, on @user_script:1.\r\n"},
		{body: "local ok, e = pcall(redis.call, 'ping') return e", want: "+PONG\r\n"},
		{body: "redis.call('nosuch') return 4",
			want: "-ERR Unknown Redis command called from script script: SHA, on @user_script:1.\r\n"},
	})
	_ = h
	e, _ = newTestEngine(t, func(c *Config) { c.NewHost = func() Host { return fixedHost{} } })
	body := []byte("redis.call('ping') redis.call('incr', KEYS[1]) return 1")
	keys := strs("k")
	var out []byte
	allocs := testing.AllocsPerRun(200, func() {
		out, _ = e.Eval(out[:0], body, keys, nil, Options{})
	})
	if string(out) != ":1\r\n" {
		t.Fatalf("reply %q", out)
	}
	if allocs != 0 {
		t.Errorf("%v allocations per run of %q, want 0: the discarded replies were converted", allocs, body)
	}
}

func TestPlainReply(t *testing.T) {
	for reply, want := range map[string]bool{
		"+OK\r\n": true, ":1\r\n": true, ":-12\r\n": true,
		"": false, "+OK": false, "+OK\r\n+OK\r\n": false, ":x\r\n": false,
		"-ERR x\r\n": false, "$1\r\na\r\n": false, "*0\r\n": false, "_\r\n": false,
	} {
		if got := plainReply([]byte(reply)); got != want {
			t.Errorf("plainReply(%q) = %v, want %v", strings.TrimSpace(reply), got, want)
		}
	}
}

// fixedHost answers PING and INCR from fixed bytes, allocating nothing.
type fixedHost struct{}

var pong, fortyTwo = []byte("+PONG\r\n"), []byte(":42\r\n")

func (fixedHost) Call(args [][]byte, _ CallFlags) []byte {
	if strings.EqualFold(string(args[0]), "ping") {
		return pong
	}
	return fortyTwo
}
