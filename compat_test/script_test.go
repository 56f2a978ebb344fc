package compat_test

import (
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// Scripting through go-redis's own script API (Eval, EvalSha, EvalRO,
// ScriptLoad, ScriptExists, ScriptFlush, Script.Run), in RESP3 (go-redis's
// default) and RESP2.

// springScript is the rate-limit script users run through EVAL.
const springScript = "return redis.call('cl.throttle', KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4])"

func sha1hex(s string) string {
	sum := sha1.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

// scriptClients runs f against a fresh server with a go-redis client per
// protocol.
func scriptClients(t *testing.T, f func(t *testing.T, ts *testServer, rdb *redis.Client)) {
	for _, proto := range []int{3, 2} {
		t.Run("resp"+string(rune('0'+proto)), func(t *testing.T) {
			ts := startServer(t, withFakeClock(t0))
			rdb := newGoRedis(t, ts, func(o *redis.Options) { o.Protocol = proto })
			f(t, ts, rdb)
		})
	}
}

// wantErr checks that err is a Redis error reply with exactly this text.
func wantErr(t *testing.T, what string, err error, text string) {
	t.Helper()
	var re redis.Error
	if !errors.As(err, &re) || re.Error() != text {
		t.Errorf("%s: got error %v, want %q", what, err, text)
	}
}

func TestScriptEvalThrottle(t *testing.T) {
	scriptClients(t, func(t *testing.T, ts *testServer, rdb *redis.Client) {
		// The same decisions as CL.THROTTLE sent directly (spec example:
		// 15 burst, 30 per 60 s).
		direct, err := rdb.Do(ctx, "CL.THROTTLE", "direct", 15, 30, 60).Result()
		if err != nil {
			t.Fatal(err)
		}
		got, err := rdb.Eval(ctx, springScript, []string{"viaeval"}, 15, 30, 60, 1).Result()
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(norm(got), norm(direct)) || !reflect.DeepEqual(norm(got), th(0, 16, 15, -1, 2)) {
			t.Errorf("EVAL: %v, direct %v", got, direct)
		}
		sha := sha1hex(springScript)
		for i := 0; i < 15; i++ {
			ts.Advance(tick)
			got, err = rdb.EvalSha(ctx, sha, []string{"viaeval"}, 15, 30, 60, 1).Result()
			if err != nil {
				t.Fatal(err)
			}
		}
		if !reflect.DeepEqual(norm(got), th(0, 16, 0, -1, 32)) {
			t.Errorf("EVALSHA after 16 calls: %v", show(norm(got)))
		}
	})
}

func TestScriptLoadExistsFlush(t *testing.T) {
	scriptClients(t, func(t *testing.T, ts *testServer, rdb *redis.Client) {
		body := "return {KEYS[1], ARGV[1], 42, redis.status_reply('fine')}"
		sha := sha1hex(body)
		exists, err := rdb.ScriptExists(ctx, sha, "0000000000000000000000000000000000000000").Result()
		if err != nil || !reflect.DeepEqual(exists, []bool{false, false}) {
			t.Fatalf("SCRIPT EXISTS: %v %v", exists, err)
		}
		_, err = rdb.EvalSha(ctx, sha, []string{"k"}, "a").Result()
		wantErr(t, "EVALSHA before LOAD", err, "NOSCRIPT No matching script. Please use EVAL.")

		loaded, err := rdb.ScriptLoad(ctx, body).Result()
		if err != nil || loaded != sha {
			t.Fatalf("SCRIPT LOAD: %q %v, want %q", loaded, err, sha)
		}
		got, err := rdb.EvalSha(ctx, strings.ToUpper(sha), []string{"k"}, "a").Result()
		if err != nil || !reflect.DeepEqual(norm(got), []any{"k", "a", int64(42), "fine"}) {
			t.Errorf("EVALSHA: %v %v", show(norm(got)), err)
		}
		if exists, _ := rdb.ScriptExists(ctx, sha).Result(); !reflect.DeepEqual(exists, []bool{true}) {
			t.Errorf("SCRIPT EXISTS after LOAD: %v", exists)
		}
		if err := rdb.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		if exists, _ := rdb.ScriptExists(ctx, sha).Result(); !reflect.DeepEqual(exists, []bool{false}) {
			t.Errorf("SCRIPT EXISTS after FLUSH: %v", exists)
		}
		if err := rdb.Do(ctx, "SCRIPT", "FLUSH", "ASYNC").Err(); err != nil {
			t.Errorf("SCRIPT FLUSH ASYNC: %v", err)
		}

		// go-redis's Script tries EVALSHA, falls back to EVAL on NOSCRIPT.
		s := redis.NewScript(springScript)
		for i := 0; i < 2; i++ {
			got, err := s.Run(ctx, rdb, []string{"k2"}, 15, 30, 60, 1).Result()
			if err != nil || len(got.([]any)) != 5 {
				t.Errorf("Script.Run %d: %v %v", i, got, err)
			}
		}
	})
}

func TestScriptConversions(t *testing.T) {
	scriptClients(t, func(t *testing.T, ts *testServer, rdb *redis.Client) {
		for _, tc := range []struct {
			body string
			want any // redis.Nil for a null reply
		}{
			{"return 7.9", int64(7)},
			{"return 'str'", "str"},
			{"return true", int64(1)},
			{"return {1, 'two', {3}}", []any{int64(1), "two", []any{int64(3)}}},
			{"return {1, nil, 3}", []any{int64(1)}},
			{"return redis.status_reply('PONG')", "PONG"},
			{"return redis.call('cl.throttle', 'c', 1, 1, 60)[3]", int64(1)},
			{"return type(redis.call('ping'))", "table"},
			{"return redis.call('ping')['ok']", "PONG"},
			{"return tostring(redis.call('get', 'nosuch'))", "false"},
			{"return false", redis.Nil},
			{"return nil", redis.Nil},
		} {
			got, err := rdb.Eval(ctx, tc.body, nil).Result()
			if tc.want == redis.Nil {
				if err != redis.Nil {
					t.Errorf("%q: got %v %v, want nil", tc.body, got, err)
				}
				continue
			}
			if err != nil || !reflect.DeepEqual(norm(got), tc.want) {
				t.Errorf("%q: got %s %v, want %s", tc.body, show(norm(got)), err, show(tc.want))
			}
		}
	})
}

func TestScriptErrors(t *testing.T) {
	scriptClients(t, func(t *testing.T, ts *testServer, rdb *redis.Client) {
		suffix := func(body string, line string) string {
			return " script: " + sha1hex(body) + ", on @user_script:" + line + "."
		}
		for _, tc := range []struct {
			body, want string
			keys       []string
			args       []any
		}{
			{body: "return redis.call('nosuch')", want: "ERR Unknown Redis command called from script"},
			{body: "return redis.call('get')", want: "ERR Wrong number of args calling Redis command from script"},
			{body: "return redis.call('multi')", want: "ERR This Redis command is not allowed from script"},
			{body: "return redis.call('cl.throttle', 'k', 'x', 30, 60)", want: "Cell error: Store error: Couldn't parse as integer: x"},
			{body: "return redis.call('cl.throttle', 'k')",
				want: "Cell error: Store error: Usage: cl.throttle <key> <max_burst> <count per period> <period> [<quantity>]"},
			{body: "local a = 1\nerror('boom')", want: "ERR user_script:2: boom"},
			{body: "undefined_global = 1", want: "ERR user_script:1: Attempt to modify a readonly table"},
			{body: "return os.time()", want: "ERR user_script:1: Script attempted to access nonexistent global variable 'os'"},
		} {
			_, err := rdb.Eval(ctx, tc.body, tc.keys, tc.args...).Result()
			line := "1"
			if strings.Contains(tc.body, "\n") {
				line = "2"
			}
			wantErr(t, tc.body, err, tc.want+suffix(tc.body, line))
		}
		// redis.pcall and error tables come back without the position.
		_, err := rdb.Eval(ctx, "return redis.pcall('nosuch')", nil).Result()
		wantErr(t, "pcall", err, "ERR Unknown Redis command called from script")
		_, err = rdb.Eval(ctx, "return redis.error_reply('MY error')", nil).Result()
		wantErr(t, "error_reply", err, "MY error")

		_, err = rdb.Eval(ctx, "return 1", []string{"a", "b"}).Result()
		if err != nil {
			t.Errorf("keys only: %v", err)
		}
		_, err = rdb.Do(ctx, "EVAL", "return 1", 3, "a").Result()
		wantErr(t, "numkeys too big", err, "ERR Number of keys can't be greater than number of args")
		_, err = rdb.Do(ctx, "EVAL", "return 1", -1).Result()
		wantErr(t, "numkeys negative", err, "ERR Number of keys can't be negative")
		_, err = rdb.Do(ctx, "EVAL", "return 1", "one").Result()
		wantErr(t, "numkeys not a number", err, "ERR value is not an integer or out of range")

		// Read-only variants.
		got, err := rdb.EvalRO(ctx, "return redis.call('exists', KEYS[1])", []string{"nosuch"}).Result()
		if err != nil || got != int64(0) {
			t.Errorf("EVAL_RO read: %v %v", got, err)
		}
		_, err = rdb.EvalRO(ctx, springScript, []string{"k"}, 15, 30, 60, 1).Result()
		wantErr(t, "EVAL_RO write", err, "ERR Write commands are not allowed from read-only scripts."+suffix(springScript, "1"))
		rdb.ScriptLoad(ctx, springScript)
		_, err = rdb.EvalShaRO(ctx, sha1hex(springScript), []string{"k"}, 15, 30, 60, 1).Result()
		wantErr(t, "EVALSHA_RO write", err, "ERR Write commands are not allowed from read-only scripts."+suffix(springScript, "1"))
	})
}

// EVAL inside MULTI/EXEC (go-redis TxPipelined) runs under EXEC.
func TestScriptInTransaction(t *testing.T) {
	scriptClients(t, func(t *testing.T, ts *testServer, rdb *redis.Client) {
		cmds, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Eval(ctx, springScript, []string{"tx"}, 15, 30, 60, 1)
			p.Eval(ctx, "return redis.call('exists', KEYS[1])", []string{"tx"})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := norm(cmds[0].(*redis.Cmd).Val()); !reflect.DeepEqual(got, th(0, 16, 15, -1, 2)) {
			t.Errorf("EVAL in EXEC: %s", show(got))
		}
		if got := cmds[1].(*redis.Cmd).Val(); got != int64(1) {
			t.Errorf("EXISTS in EXEC: %v", got)
		}
	})
}
