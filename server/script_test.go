package server

import (
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/celld/celld/script"
	"github.com/celld/celld/store"
)

// Scripting through s.dispatch, without sockets: command → exact RESP.

// newScriptFixture returns a Server (not listening) with a fake clock that
// moves 1 µs per read, and a client whose replies accumulate in c.out.
func newScriptFixture(tb testing.TB, mods ...func(*Config)) (*Server, *client) {
	tb.Helper()
	var clock atomic.Int64
	clock.Store(1_700_000_000_000_000_000)
	cfg := Config{
		Clock:  func() int64 { return clock.Add(1000) },
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	for _, m := range mods {
		m(&cfg)
	}
	s, err := New(cfg, store.New(store.Options{}))
	if err != nil {
		tb.Fatal(err)
	}
	return s, &client{srv: s, proto: 2, multiLen: -1, authed: true}
}

func scriptArgs(ss ...string) [][]byte {
	out := make([][]byte, len(ss))
	for i, s := range ss {
		out[i] = []byte(s)
	}
	return out
}

// send dispatches one command and returns its reply.
func send(s *Server, c *client, args ...string) string {
	c.out = c.out[:0]
	s.dispatchLookup(c, scriptArgs(args...))
	return string(c.out)
}

type scriptStep struct {
	args []string
	want string // "SHA" is replaced by the SHA1 of args[1]
}

func runScriptSteps(t *testing.T, s *Server, c *client, steps []scriptStep) {
	t.Helper()
	for i, st := range steps {
		want := st.want
		if len(st.args) > 1 {
			want = strings.ReplaceAll(want, "SHA", script.SHA1Hex([]byte(st.args[1])))
		}
		if got := send(s, c, st.args...); got != want {
			t.Errorf("step %d: %q\n got: %q\nwant: %q", i, st.args, got, want)
		}
	}
}

const springScript = "return redis.call('cl.throttle', KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4])"

func TestEvalDispatch(t *testing.T) {
	s, c := newScriptFixture(t)
	springSHA := script.SHA1Hex([]byte(springScript))
	runScriptSteps(t, s, c, []scriptStep{
		{[]string{"EVAL", "return 1", "0"}, ":1\r\n"},
		{[]string{"EVAL", springScript, "1", "k", "1", "1", "60", "1"}, "*5\r\n:0\r\n:2\r\n:1\r\n:-1\r\n:60\r\n"},
		{[]string{"EVALSHA", springSHA, "1", "k", "1", "1", "60", "1"}, "*5\r\n:0\r\n:2\r\n:0\r\n:-1\r\n:120\r\n"},
		{[]string{"EVALSHA", strings.ToUpper(springSHA), "1", "k", "1", "1", "60", "1"}, "*5\r\n:1\r\n:2\r\n:0\r\n:60\r\n:120\r\n"},
		{[]string{"EVAL", "return redis.call('set', KEYS[1], ARGV[1])", "1", "s", "5"}, "+OK\r\n"},
		{[]string{"EVAL", "return redis.call('get', KEYS[1])", "1", "s"}, "$1\r\n5\r\n"},
		{[]string{"EVAL", "return redis.call('get', 'nosuch')", "0"}, "$-1\r\n"},
		{[]string{"EVAL", "return redis.call('get', 'nosuch') == false", "0"}, ":1\r\n"},
		{[]string{"EVAL", "return redis.call('exists', 's', 'nosuch')", "0"}, ":1\r\n"},
		{[]string{"EVAL", "return redis.call('ping')", "0"}, "+PONG\r\n"},
		{[]string{"EVAL", "return redis.call('PiNg', 'x')", "0"}, "$1\r\nx\r\n"},

		// Errors from commands and from the script layer, Redis 7.2's texts.
		{[]string{"EVAL", "return redis.call('nosuch')", "0"}, "-ERR Unknown Redis command called from script script: SHA, on @user_script:1.\r\n"},
		{[]string{"EVAL", "return redis.call('get')", "0"}, "-ERR Wrong number of args calling Redis command from script script: SHA, on @user_script:1.\r\n"},
		{[]string{"EVAL", "return redis.call('multi')", "0"}, "-ERR This Redis command is not allowed from script script: SHA, on @user_script:1.\r\n"},
		{[]string{"EVAL", "return redis.call('eval', 'return 1', '0')", "0"}, "-ERR This Redis command is not allowed from script script: SHA, on @user_script:1.\r\n"},
		{[]string{"EVAL", "return redis.call('client', 'id')", "0"}, "-ERR This Redis command is not allowed from script script: SHA, on @user_script:1.\r\n"},
		{[]string{"EVAL", "return redis.call('client', 'nosuch')", "0"}, "-ERR Unknown Redis command called from script script: SHA, on @user_script:1.\r\n"},
		{[]string{"EVAL", "return redis.call('client')", "0"}, "-ERR Wrong number of args calling Redis command from script script: SHA, on @user_script:1.\r\n"},
		{[]string{"EVAL", "return redis.call('cl.throttle', 'k', 'x', '1', '1')", "0"}, "-Cell error: Store error: Couldn't parse as integer: x script: SHA, on @user_script:1.\r\n"},
		{[]string{"EVAL", "return redis.pcall('cl.throttle', 'k', 'x', '1', '1')", "0"}, "-Cell error: Store error: Couldn't parse as integer: x\r\n"},
		{[]string{"EVAL", "return redis.call('incr', 's')", "0"}, "-ERR Unknown Redis command called from script script: SHA, on @user_script:1.\r\n"},

		// Read-only scripts.
		{[]string{"EVAL_RO", "return redis.call('get', KEYS[1])", "1", "s"}, "$1\r\n5\r\n"},
		{[]string{"EVAL_RO", "return redis.call('set', KEYS[1], 'w')", "1", "s"}, "-ERR Write commands are not allowed from read-only scripts. script: SHA, on @user_script:1.\r\n"},
		{[]string{"EVAL_RO", springScript, "1", "k", "1", "1", "60", "1"}, "-ERR Write commands are not allowed from read-only scripts. script: SHA, on @user_script:1.\r\n"},
		{[]string{"EVAL_RO", "#!lua\nreturn 1", "0"}, "-ERR Can not execute a script with write flag using *_ro command.\r\n"},
		{[]string{"EVAL_RO", "#!lua flags=no-writes\nreturn 1", "0"}, ":1\r\n"},
		{[]string{"EVAL", "#!lua flags=no-writes\nreturn redis.call('del', 's')", "0"}, "-ERR Write commands are not allowed from read-only scripts. script: SHA, on @user_script:2.\r\n"},
		{[]string{"EVALSHA_RO", springSHA, "1", "k", "1", "1", "60", "1"}, "-ERR Write commands are not allowed from read-only scripts. script: " + springSHA + ", on @user_script:1.\r\n"},

		// Argument errors.
		{[]string{"EVAL", "return 1", "x"}, "-ERR value is not an integer or out of range\r\n"},
		{[]string{"EVAL", "return 1", "1"}, "-ERR Number of keys can't be greater than number of args\r\n"},
		{[]string{"EVAL", "return 1", "-1"}, "-ERR Number of keys can't be negative\r\n"},
		{[]string{"EVAL", "return 1"}, "-ERR wrong number of arguments for 'eval' command\r\n"},
		{[]string{"EVALSHA", "abc", "0"}, "-NOSCRIPT No matching script. Please use EVAL.\r\n"},
		{[]string{"EVALSHA", "abc", "x"}, "-NOSCRIPT No matching script. Please use EVAL.\r\n"},
		{[]string{"EVALSHA", strings.Repeat("0", 40), "0"}, "-NOSCRIPT No matching script. Please use EVAL.\r\n"},
		{[]string{"EVAL", "return +", "0"}, "-ERR Error compiling script (new function): user_script:1: syntax error near '+'\r\n"},
		{[]string{"EVAL", "#!perl\nreturn 1", "0"}, "-ERR Unexpected engine in script shebang: #!perl\r\n"},
	})
}

func TestScriptCommand(t *testing.T) {
	s, c := newScriptFixture(t)
	body := "return 'loaded'"
	sha := script.SHA1Hex([]byte(body))
	runScriptSteps(t, s, c, []scriptStep{
		{[]string{"SCRIPT", "EXISTS", sha, "nosuch"}, "*2\r\n:0\r\n:0\r\n"},
		{[]string{"SCRIPT", "LOAD", body}, "$40\r\n" + sha + "\r\n"},
		{[]string{"SCRIPT", "EXISTS", sha, strings.ToUpper(sha), "nosuch"}, "*3\r\n:1\r\n:1\r\n:0\r\n"},
		{[]string{"EVALSHA", sha, "0"}, "$6\r\nloaded\r\n"},
		{[]string{"SCRIPT", "LOAD", "return +"}, "-ERR Error compiling script (new function): user_script:1: syntax error near '+'\r\n"},
		{[]string{"SCRIPT", "FLUSH", "bogus"}, "-ERR SCRIPT FLUSH only support SYNC|ASYNC option\r\n"},
		{[]string{"SCRIPT", "FLUSH", "ASYNC"}, "+OK\r\n"},
		{[]string{"SCRIPT", "EXISTS", sha}, "*1\r\n:0\r\n"},
		{[]string{"EVALSHA", sha, "0"}, "-NOSCRIPT No matching script. Please use EVAL.\r\n"},
		{[]string{"EVAL", body, "0"}, "$6\r\nloaded\r\n"},
		{[]string{"SCRIPT", "EXISTS", sha}, "*1\r\n:1\r\n"},
		{[]string{"SCRIPT", "FLUSH"}, "+OK\r\n"},
		{[]string{"SCRIPT", "FLUSH", "sync"}, "+OK\r\n"},
		{[]string{"SCRIPT", "KILL"}, "-NOTBUSY No scripts in execution right now.\r\n"},
		{[]string{"SCRIPT", "LOAD"}, "-ERR wrong number of arguments for 'script|load' command\r\n"},
		{[]string{"SCRIPT", "EXISTS"}, "-ERR wrong number of arguments for 'script|exists' command\r\n"},
		{[]string{"SCRIPT", "DEBUG", "YES"}, "-ERR unknown subcommand 'DEBUG'. Try SCRIPT HELP.\r\n"},
		{[]string{"EVAL", "return redis.call('script', 'load', 'return 1')", "0"}, "-ERR This Redis command is not allowed from script script: SHA, on @user_script:1.\r\n"},
	})
	if got := send(s, c, "SCRIPT", "HELP"); !strings.HasPrefix(got, "*15\r\n+SCRIPT <subcommand>") {
		t.Errorf("SCRIPT HELP: %q", got)
	}
}

// EVAL queued in MULTI runs inside EXEC (which already holds the lock).
func TestEvalInMulti(t *testing.T) {
	s, c := newScriptFixture(t)
	runScriptSteps(t, s, c, []scriptStep{
		{[]string{"MULTI"}, "+OK\r\n"},
		{[]string{"EVAL", "return redis.call('set', 'a', '1')", "0"}, "+QUEUED\r\n"},
		{[]string{"EVAL", "return redis.call('get', 'a')", "0"}, "+QUEUED\r\n"},
		{[]string{"EXEC"}, "*2\r\n+OK\r\n$1\r\n1\r\n"},
	})
}

// RESP3 callers get RESP3 shapes; a script's commands still speak RESP2
// unless the script calls redis.setresp(3).
func TestEvalRESP3(t *testing.T) {
	s, c := newScriptFixture(t)
	c.setProto(true)
	runScriptSteps(t, s, c, []scriptStep{
		{[]string{"EVAL", "return redis.call('get', 'nosuch')", "0"}, "_\r\n"},
		{[]string{"EVAL", "return nil", "0"}, "_\r\n"},
		{[]string{"EVAL", "redis.setresp(3); return redis.call('get', 'nosuch') == nil", "0"}, "#t\r\n"},
		// A one-element set: Lua tables do not keep a set's order.
		{[]string{"EVAL", "redis.setresp(3); return redis.call('command', 'info', 'ping')[1][3]", "0"}, "~1\r\n+fast\r\n"},
		{[]string{"EVAL", "return {double = 2.5}", "0"}, ",2.5\r\n"},
	})
}

func TestScriptTimeLimit(t *testing.T) {
	s, c := newScriptFixture(t, func(cfg *Config) { cfg.ScriptTimeLimit = 50 * time.Millisecond })
	start := time.Now()
	got := send(s, c, "EVAL", "redis.call('set', 'x', '1') while true do end", "0")
	want := "-ERR script timed out after 50ms script: " + script.SHA1Hex([]byte("redis.call('set', 'x', '1') while true do end")) + ", on @user_script:1.\r\n"
	if got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %v", d)
	}
	// Writes before the kill stay (as Redis scripts' writes do on error).
	if got := send(s, c, "GET", "x"); got != "$1\r\n1\r\n" {
		t.Errorf("GET x after the timeout: %q", got)
	}
	if _, err := New(Config{ScriptTimeLimit: -1}, store.New(store.Options{})); err == nil {
		t.Error("negative ScriptTimeLimit accepted")
	}
}

// A script is atomic: nothing else runs between its commands.
func TestScriptAtomic(t *testing.T) {
	s, c := newScriptFixture(t)
	body := "redis.call('set', KEYS[1], '1'); for i = 1, 20000 do end; local v = redis.call('get', KEYS[1]); redis.call('del', KEYS[1]); return v"
	done := make(chan struct{})
	go func() {
		defer close(done)
		c2 := &client{srv: s, id: 2, proto: 2, multiLen: -1, authed: true}
		for i := 0; i < 2000; i++ {
			send(s, c2, "SET", "k", "2")
		}
	}()
	for i := 0; i < 200; i++ {
		if got := send(s, c, "EVAL", body, "1", "k"); got != "$1\r\n1\r\n" {
			t.Fatalf("iteration %d: %q (another client's SET ran inside the script)", i, got)
		}
	}
	<-done
}

// One-command scripts take the read lock and run in parallel with each
// other and with everything else; the rest take the write lock. Under
// -race this also checks the engine and the scratch clients.
func TestEvalConcurrent(t *testing.T) {
	s, _ := newScriptFixture(t)
	const workers, rounds = 4, 300
	done := make(chan string, workers)
	for w := 0; w < workers; w++ {
		go func(w int) {
			c := &client{srv: s, id: int64(10 + w), proto: 2, multiLen: -1, authed: true}
			key := "user:" + strconv.Itoa(w)
			for i := 0; i < rounds; i++ {
				var got string
				switch i % 3 {
				case 0:
					got = send(s, c, "EVAL", springScript, "1", key, "1000", "1", "3600", "1")
				case 1:
					got = send(s, c, "EVAL", "local r = redis.call('cl.throttle', KEYS[1], 1000, 1, 3600) return r", "1", key)
				default:
					got = send(s, c, "EVAL", "redis.call('cl.throttle', KEYS[1], 1000, 1, 3600) return redis.call('cl.throttle', KEYS[1], 1000, 1, 3600)", "1", key)
				}
				if !strings.HasPrefix(got, "*5\r\n:0\r\n:1001\r\n") {
					done <- got
					return
				}
			}
			// Every call counted once: 300 rounds, 400 calls.
			want := "*5\r\n:0\r\n:1001\r\n:" + strconv.Itoa(1001-401) + "\r\n"
			if got := send(s, c, "CL.THROTTLE", key, "1000", "1", "3600"); !strings.HasPrefix(got, want) {
				done <- got
				return
			}
			done <- ""
		}(w)
	}
	for w := 0; w < workers; w++ {
		if msg := <-done; msg != "" {
			t.Error(msg)
		}
	}
}

// BenchmarkEvalSpring and BenchmarkDirectThrottle measure the same
// CL.THROTTLE on an existing key through s.dispatch: directly, through
// EVAL and through EVALSHA.
func BenchmarkDirectThrottle(b *testing.B) {
	s, c := newScriptFixture(b)
	args := scriptArgs("CL.THROTTLE", "user:1", "1000000000000", "1000", "1", "1")
	benchDispatch(b, s, c, args)
}

func BenchmarkEvalSpring(b *testing.B) {
	b.Run("eval", func(b *testing.B) {
		s, c := newScriptFixture(b)
		args := scriptArgs("EVAL", springScript, "1", "user:1", "1000000000000", "1000", "1", "1")
		benchDispatch(b, s, c, args)
	})
	b.Run("evalsha", func(b *testing.B) {
		s, c := newScriptFixture(b)
		sha := script.SHA1Hex([]byte(springScript))
		send(s, c, "SCRIPT", "LOAD", springScript)
		args := scriptArgs("EVALSHA", sha, "1", "user:1", "1000000000000", "1000", "1", "1")
		benchDispatch(b, s, c, args)
	})
	// The same call written so that it runs on the Lua VM (still one
	// command: the read lock).
	b.Run("vm", func(b *testing.B) {
		s, c := newScriptFixture(b)
		args := scriptArgs("EVAL", springViaVM, "1", "user:1", "1000000000000", "1000", "1", "1")
		benchDispatch(b, s, c, args)
	})
	// Two commands: the VM under the isolation write lock.
	b.Run("vm-exclusive", func(b *testing.B) {
		s, c := newScriptFixture(b)
		args := scriptArgs("EVAL", springTwice, "1", "user:1", "1000000000000", "1000", "1", "1")
		benchDispatch(b, s, c, args)
	})
}

const (
	springViaVM = "local r = redis.call('cl.throttle', KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4]) return r"
	springTwice = "if ARGV[5] then redis.call('ping') end return redis.call('cl.throttle', KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4])"
)

// BenchmarkEvalSpringRatio interleaves blocks of direct CL.THROTTLE, EVAL,
// EVALSHA and the two VM variants on one server and reports their time
// ratios, which load on the machine disturbs much less than the absolute
// times.
func BenchmarkEvalSpringRatio(b *testing.B) {
	s, c := newScriptFixture(b)
	direct := scriptArgs("CL.THROTTLE", "user:1", "1000000000000", "1000", "1", "1")
	eval := scriptArgs("EVAL", springScript, "1", "user:1", "1000000000000", "1000", "1", "1")
	evalsha := scriptArgs("EVALSHA", script.SHA1Hex([]byte(springScript)), "1", "user:1", "1000000000000", "1000", "1", "1")
	vm := scriptArgs("EVAL", springViaVM, "1", "user:1", "1000000000000", "1000", "1", "1")
	excl := scriptArgs("EVAL", springTwice, "1", "user:1", "1000000000000", "1000", "1", "1")
	var spent [5]time.Duration
	cmds := [5][][]byte{direct, eval, evalsha, vm, excl}
	for _, args := range cmds {
		c.out = c.out[:0]
		s.dispatchLookup(c, args)
	}
	const block = 256
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; done += block {
		for k, args := range cmds {
			start := time.Now()
			for i := 0; i < block; i++ {
				c.out = c.out[:0]
				s.dispatchLookup(c, args)
			}
			spent[k] += time.Since(start)
		}
	}
	b.ReportMetric(float64(spent[1])/float64(spent[0]), "eval/direct")
	b.ReportMetric(float64(spent[2])/float64(spent[0]), "evalsha/direct")
	b.ReportMetric(float64(spent[3])/float64(spent[0]), "vm/direct")
	b.ReportMetric(float64(spent[4])/float64(spent[0]), "vm-exclusive/direct")
	b.ReportMetric(float64(spent[0])/float64(b.N+block), "direct-ns/op")
}

func benchDispatch(b *testing.B, s *Server, c *client, args [][]byte) {
	b.Helper()
	c.out = c.out[:0]
	s.dispatchLookup(c, args) // creates the key (and caches the script)
	if !strings.HasPrefix(string(c.out), "*5\r\n:0\r\n") {
		b.Fatalf("reply %q", c.out)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c.out = c.out[:0]
		s.dispatchLookup(c, args)
	}
	b.StopTimer()
	if !strings.HasPrefix(string(c.out), "*5\r\n:0\r\n") {
		b.Fatalf("reply %q", c.out)
	}
}
