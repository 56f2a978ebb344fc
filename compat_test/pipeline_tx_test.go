package compat_test

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	redigo "github.com/gomodule/redigo/redis"
	"github.com/redis/go-redis/v9"
)

// pipeWant is the reply of call n (1-based) of CL.THROTTLE pipe 499 1 1 when
// all calls happen at the same instant: 500 allowed, then denied with retry
// 1 s (one EI) and reset 500 s.
func pipeWant(n int64) []any {
	if n <= 500 {
		return th(0, 500, 500-n, -1, n)
	}
	return th(1, 500, 0, 1, 500)
}

func TestGoRedisPipeline1000(t *testing.T) {
	for _, p := range []struct {
		name string
		mods []func(*redis.Options)
	}{{"resp3", nil}, {"resp2", []func(*redis.Options){resp2}}} {
		t.Run(p.name, func(t *testing.T) {
			ts := startServer(t, withFakeClock(t0))
			rdb := newGoRedis(t, ts, p.mods...)
			pipe := rdb.Pipeline()
			cmds := make([]*redis.Cmd, 1000)
			for i := range cmds {
				cmds[i] = pipe.Do(ctx, "CL.THROTTLE", "pipe", 499, 1, 1)
			}
			if _, err := pipe.Exec(ctx); err != nil {
				t.Fatalf("Exec: %v", err)
			}
			for i, cmd := range cmds {
				got, err := goRedisReply(cmd.Result())
				if want := pipeWant(int64(i + 1)); err != nil || !reflect.DeepEqual(got, want) {
					t.Fatalf("call %d: %s %v, want %s", i+1, show(got), err, show(want))
				}
			}
		})
	}
}

func TestRedigoPipeline1000(t *testing.T) {
	ts := startServer(t, withFakeClock(t0))
	conn := newRedigo(t, ts)
	for i := 0; i < 1000; i++ {
		if err := conn.Send("CL.THROTTLE", "pipe", 499, 1, 1); err != nil {
			t.Fatal(err)
		}
	}
	// An error in the middle of the pipeline keeps the framing.
	if err := conn.Send("CL.THROTTLE", "pipe", 499, 1); err != nil {
		t.Fatal(err)
	}
	if err := conn.Flush(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 1000; i++ {
		got, err := redigo.Values(conn.Receive())
		if want := pipeWant(int64(i + 1)); err != nil || !reflect.DeepEqual(norm(got), want) {
			t.Fatalf("call %d: %s %v, want %s", i+1, show(norm(got)), err, show(want))
		}
	}
	_, err := conn.Receive()
	if re, ok := err.(redigo.Error); !ok || errText(re) != usage {
		t.Fatalf("last reply: %v, want the usage error", err)
	}
}

func TestGoRedisTxPipelined(t *testing.T) {
	ts := startServer(t, withFakeClock(t0))
	rdb := newGoRedis(t, ts)
	var a, b, bad *redis.Cmd
	var get *redis.StringCmd
	cmds, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		a = p.Do(ctx, "CL.THROTTLE", "tx", 0, 1, 2)
		b = p.Do(ctx, "CL.THROTTLE", "tx", 0, 1, 2)
		bad = p.Do(ctx, "CL.THROTTLE", "tx", 0, 1) // queued (arity −1), fails in EXEC
		get = p.Get(ctx, "tx")
		return nil
	})
	// The pipeline's error is the first failing command's.
	if err == nil || err.Error() != string(usage) {
		t.Fatalf("TxPipelined error %v, want the usage error", err)
	}
	if len(cmds) != 4 {
		t.Fatalf("%d commands", len(cmds))
	}
	// One instant (the clock does not move inside EXEC): the second call is
	// denied with retry and reset of exactly 2 s.
	for i, x := range []struct {
		cmd  *redis.Cmd
		want any
	}{{a, th(0, 1, 0, -1, 2)}, {b, th(1, 1, 0, 2, 2)}, {bad, usage}} {
		if got, err := goRedisReply(x.cmd.Result()); err != nil || !reflect.DeepEqual(got, x.want) {
			t.Errorf("command %d: %s %v, want %s", i, show(got), err, show(x.want))
		}
	}
	if v, err := get.Result(); err != nil || v != tatAt(2*1e9) {
		t.Errorf("GET = %q %v, want %q", v, err, tatAt(2*1e9))
	}
}

// TestRawMultiExec drives MULTI/EXEC/DISCARD by hand on one connection.
func TestRawMultiExec(t *testing.T) {
	ts := startServer(t, withFakeClock(t0))
	conn := newGoRedis(t, ts).Conn()
	t.Cleanup(func() { conn.Close() })
	runSteps(t, ts, goRedisDo(conn), []step{
		{c("EXEC"), errText("ERR EXEC without MULTI")},
		{c("DISCARD"), errText("ERR DISCARD without MULTI")},

		{c("MULTI"), "OK"},
		{c("CL.THROTTLE m 0 1 2"), "QUEUED"},
		{c("CL.THROTTLE m 0 1 2"), "QUEUED"},
		{c("CL.THROTTLE m 0 1"), "QUEUED"},
		{c("PTTL m"), "QUEUED"},
		{c("MULTI"), errText("ERR MULTI calls can not be nested")},
		{c("EXEC"), []any{th(0, 1, 0, -1, 2), th(1, 1, 0, 2, 2), usage, int64(2000)}},

		// DISCARD drops the queue: nothing runs.
		{c("MULTI"), "OK"},
		{c("CL.THROTTLE d 0 1 2"), "QUEUED"},
		{c("DISCARD"), "OK"},
		{c("EXISTS d"), int64(0)},

		// A command that fails to queue aborts the transaction.
		{c("MULTI"), "OK"},
		{c("CL.THROTTLE x 0 1 2"), "QUEUED"},
		{c("foo bar"), errText("ERR unknown command 'foo', with args beginning with: 'bar' ")},
		{c("CL.THROTTLE x 0 1 2"), "QUEUED"},
		{c("EXEC"), errText("EXECABORT Transaction discarded because of previous errors.")},
		{c("EXISTS x"), int64(0)},

		// So does a wrong arity.
		{c("MULTI"), "OK"},
		{c("CL.THROTTLE y 0 1 2"), "QUEUED"},
		{c("GET"), errText("ERR wrong number of arguments for 'get' command")},
		{c("EXEC"), errText("EXECABORT Transaction discarded because of previous errors.")},
		{c("EXISTS y"), int64(0)},

		// An empty transaction.
		{c("MULTI"), "OK"},
		{c("EXEC"), []any{}},
	})
}

// doer is what go-redis clients, Conns, Txs and Pipeliners share.
type doer interface {
	Do(ctx context.Context, args ...any) *redis.Cmd
}

// TestWatch: an allowed CL.THROTTLE by another client on a watched key is a
// write and aborts EXEC; a denied one writes nothing and does not.
func TestWatch(t *testing.T) {
	ts := startServer(t, withFakeClock(t0))
	rdb := newGoRedis(t, ts)
	other := newGoRedis(t, ts)

	throttle := func(cl doer, key string, args ...any) *redis.Cmd {
		return cl.Do(ctx, append([]any{"CL.THROTTLE", key}, args...)...)
	}
	// txn WATCHes key, lets meddle run on the other client, then runs a
	// MULTI/EXEC with one CL.THROTTLE.
	txn := func(key string, meddle func()) (*redis.Cmd, error) {
		var in *redis.Cmd
		err := rdb.Watch(ctx, func(tx *redis.Tx) error {
			meddle()
			_, err := tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
				in = throttle(p, key, 0, 1, 60)
				return nil
			})
			return err
		}, key)
		return in, err
	}

	// Allowed by the other client: EXEC answers null.
	var meddled any
	_, err := txn("w1", func() { meddled, _ = goRedisReply(throttle(other, "w1", 0, 1, 60).Result()) })
	if !errors.Is(err, redis.TxFailedErr) {
		t.Errorf("allowed meddling: err %v, want redis.TxFailedErr", err)
	}
	if want := th(0, 1, 0, -1, 60); !reflect.DeepEqual(meddled, want) {
		t.Errorf("meddling call = %s, want %s", show(meddled), show(want))
	}

	// Denied by the other client (w2 is full already): EXEC runs.
	if _, err := throttle(rdb, "w2", 0, 1, 60).Result(); err != nil {
		t.Fatal(err)
	}
	in, err := txn("w2", func() { meddled, _ = goRedisReply(throttle(other, "w2", 0, 1, 60).Result()) })
	if err != nil {
		t.Errorf("denied meddling: EXEC failed: %v", err)
	}
	if want := th(1, 1, 0, 60, 60); !reflect.DeepEqual(meddled, want) {
		t.Errorf("meddling call = %s, want %s", show(meddled), show(want))
	}
	if got, _ := goRedisReply(in.Result()); !reflect.DeepEqual(got, th(1, 1, 0, 60, 60)) {
		t.Errorf("call inside EXEC = %s", show(got))
	}

	// A peek (quantity 0) on a fresh key is an allowed write even though
	// the key vanishes at once (0 ms TTL): it aborts too.
	_, err = txn("w3", func() { meddled, _ = goRedisReply(throttle(other, "w3", 0, 1, 60, 0).Result()) })
	if !errors.Is(err, redis.TxFailedErr) {
		t.Errorf("peek meddling: err %v, want redis.TxFailedErr", err)
	}
	if want := th(0, 1, 1, -1, 0); !reflect.DeepEqual(meddled, want) {
		t.Errorf("peek = %s, want %s", show(meddled), show(want))
	}

	// An error reply writes nothing: no abort.
	if _, err := txn("w4", func() { throttle(other, "w4", 0, 0, 60) }); err != nil {
		t.Errorf("error meddling: EXEC failed: %v", err)
	}

	// A watched key that expires before EXEC counts as modified (Redis
	// 6.0.9 and later): a 1 s bucket's key, then 2 s pass.
	if _, err := throttle(rdb, "w6", 0, 1, 1).Result(); err != nil {
		t.Fatal(err)
	}
	if _, err := txn("w6", func() { ts.Advance(2 * time.Second) }); !errors.Is(err, redis.TxFailedErr) {
		t.Errorf("expired watched key: err %v, want redis.TxFailedErr", err)
	}

	// Nobody meddles: EXEC runs.
	if _, err := txn("w5", func() {}); err != nil {
		t.Errorf("no meddling: %v", err)
	}
}

// TestWatchRaw is the same with bytes you can read: EXEC's null in RESP2 is
// *-1 and in RESP3 _.
func TestWatchRaw(t *testing.T) {
	ts := startServer(t, withFakeClock(t0))
	other := dialRaw(t, ts)
	for _, p := range []struct {
		hello, null string
	}{{"2", "*-1\r\n"}, {"3", "_\r\n"}} {
		rc := dialRaw(t, ts)
		id := clientID(t, rc)
		hello := hello2(id)
		if p.hello == "3" {
			hello = hello3(id)
		}
		runRaw(t, rc, []rawStep{{resp("HELLO", p.hello), hello}})
		key := "raw" + p.hello
		runRaw(t, rc, []rawStep{{resp("WATCH", key), "+OK\r\n"}})
		runRaw(t, other, []rawStep{{resp("CL.THROTTLE", key, "0", "1", "60"), "*5\r\n:0\r\n:1\r\n:0\r\n:-1\r\n:60\r\n"}})
		runRaw(t, rc, []rawStep{
			{resp("MULTI"), "+OK\r\n"},
			{resp("CL.THROTTLE", key, "0", "1", "60"), "+QUEUED\r\n"},
			{resp("EXEC"), p.null},
			// EXEC unwatched: the next transaction runs.
			{resp("MULTI"), "+OK\r\n"},
			{resp("CL.THROTTLE", key, "0", "1", "60"), "+QUEUED\r\n"},
			{resp("EXEC"), "*1\r\n*5\r\n:1\r\n:1\r\n:0\r\n:60\r\n:60\r\n"},
		})
	}
}

// A key that was missing at WATCH and is created by another client aborts
// the EXEC even if it has expired again by then (Redis's touchWatchedKey),
// and a FLUSHALL aborts the watchers of the keys it removed (Redis 7's
// touchAllWatchedKeysInDb; TestRedisDiffFlushWatch has the missing keys).
func TestWatchCreatedThenExpired(t *testing.T) {
	ts := startServer(t, withFakeClock(1_796_007_429_047_254_250))
	ctx := context.Background()
	a := redis.NewClient(&redis.Options{Addr: ts.Addr})
	b := redis.NewClient(&redis.Options{Addr: ts.Addr})
	t.Cleanup(func() { a.Close(); b.Close() })

	err := a.Watch(ctx, func(tx *redis.Tx) error {
		if err := b.Set(ctx, "wk", "5", 10*time.Millisecond).Err(); err != nil {
			return err
		}
		ts.Advance(50 * time.Millisecond) // wk is gone again
		if n, _ := tx.Exists(ctx, "wk").Result(); n != 0 {
			t.Errorf("wk still exists after its TTL")
		}
		_, err := tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Get(ctx, "wk")
			return nil
		})
		return err
	}, "wk")
	if !errors.Is(err, redis.TxFailedErr) {
		t.Fatalf("EXEC after the watched key was created and expired: %v, want TxFailedErr", err)
	}

	if err := b.Set(ctx, "other", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	err = a.Watch(ctx, func(tx *redis.Tx) error {
		if err := b.FlushAll(ctx).Err(); err != nil {
			return err
		}
		_, err := tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Get(ctx, "other")
			return nil
		})
		return err
	}, "other")
	if !errors.Is(err, redis.TxFailedErr) {
		t.Fatalf("EXEC after FLUSHALL: %v, want TxFailedErr", err)
	}

	// A denied CL.THROTTLE writes nothing and does not abort.
	b.Do(ctx, "CL.THROTTLE", "deny", 0, 1, 3600)
	err = a.Watch(ctx, func(tx *redis.Tx) error {
		if r, err := b.Do(ctx, "CL.THROTTLE", "deny", 0, 1, 3600).Int64Slice(); err != nil || r[0] != 1 {
			t.Fatalf("second call: %v %v, want denied", r, err)
		}
		_, err := tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Get(ctx, "deny")
			return nil
		})
		return err
	}, "deny")
	if err != nil {
		t.Fatalf("EXEC after a denied CL.THROTTLE on the watched key: %v", err)
	}
}
