package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Issue 23: strings hold any bytes, and persist like TATs: exact after
// SIGTERM, and after kill -9 once the flush window that wrote them has
// passed (INFO persistence's dirty_keys back at 0).

// binaryValues are the strings the restart tests write: every byte value,
// CR/LF and NUL, the empty string, integers that are and are not TATs, a
// float, and a value larger than one flush block.
func binaryValues() map[string]string {
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	return map[string]string{
		"s:all":   string(all),
		"s:crlf":  "a\r\nb\x00c\r\n",
		"s:empty": "",
		"s:json":  `{"burst":15}`,
		"s:tat":   "1700000000000000000",
		"s:plus":  "+5",
		"s:neg":   "-42",
		"s:float": "3.14",
		"s:big":   strings.Repeat("0123456789abcdef", 64<<10/16) + "\xff",
	}
}

func writeBinary(t *testing.T, rdb *redis.Client, vals map[string]string) {
	t.Helper()
	ctx := context.Background()
	for k, v := range vals {
		if err := rdb.Set(ctx, k, v, 0).Err(); err != nil {
			t.Fatalf("SET %s: %v", k, err)
		}
	}
	if err := rdb.Set(ctx, "s:ttl", "\x00ttl", time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.IncrBy(ctx, "s:counter", -7).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.IncrByFloat(ctx, "s:fcounter", 10.5).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Append(ctx, "s:appended", "ab\x00").Err(); err != nil {
		t.Fatal(err)
	}
}

func checkBinary(t *testing.T, rdb *redis.Client, vals map[string]string, when string) {
	t.Helper()
	ctx := context.Background()
	want := map[string]string{"s:ttl": "\x00ttl", "s:counter": "-7", "s:fcounter": "10.5", "s:appended": "ab\x00"}
	for k, v := range vals {
		want[k] = v
	}
	for k, v := range want {
		got, err := rdb.Get(ctx, k).Result()
		if err != nil || got != v {
			t.Errorf("%s: GET %s = %q (%v), want %q (%d bytes)", when, k, trunc(got), err, trunc(v), len(v))
		}
	}
	if ttl := rdb.TTL(ctx, "s:ttl").Val(); ttl <= 59*time.Minute || ttl > time.Hour {
		t.Errorf("%s: TTL s:ttl = %v, want about 1h", when, ttl)
	}
	if ttl := rdb.TTL(ctx, "s:all").Val(); ttl != -1 {
		t.Errorf("%s: TTL s:all = %v, want -1 (no TTL)", when, ttl)
	}
	// What CL.THROTTLE reads: a TAT stays one; the others are refused.
	if err := rdb.Do(ctx, "CL.THROTTLE", "s:json", 1, 1, 1).Err(); err == nil || !strings.Contains(err.Error(), "invalid stored value") {
		t.Errorf("%s: CL.THROTTLE on a JSON string: %v, want invalid stored value", when, err)
	}
	if n, err := rdb.Incr(ctx, "s:plus").Result(); err == nil {
		t.Errorf("%s: INCR of \"+5\" = %d, want Redis's not-an-integer error", when, n)
	}
}

func trunc(s string) string {
	if len(s) > 40 {
		return fmt.Sprintf("%q...(%d bytes)", s[:40], len(s))
	}
	return s
}

func TestProcessBinaryStringsSurviveRestarts(t *testing.T) {
	dir := t.TempDir()
	vals := binaryValues()
	c := mustLaunch(t, dir, "--proto-max-bulk-len", "1mb")
	rdb := c.client()
	writeBinary(t, rdb, vals)
	checkBinary(t, rdb, vals, "before any restart")
	rdb.Close()
	c.termOK()

	c = mustLaunch(t, dir, "--proto-max-bulk-len", "1mb")
	rdb = c.client()
	checkBinary(t, rdb, vals, "after SIGTERM")

	// Rewrite everything with other bytes, wait for the flush window that
	// carries them, then kill -9.
	for k, v := range vals {
		vals[k] = v + "\x00more"
	}
	writeBinary(t, rdb, vals)
	rdb.Set(context.Background(), "s:counter", "0", 0)
	rdb.IncrBy(context.Background(), "s:counter", -7)
	rdb.Set(context.Background(), "s:fcounter", "0", 0)
	rdb.IncrByFloat(context.Background(), "s:fcounter", 10.5)
	rdb.Set(context.Background(), "s:appended", "", 0)
	rdb.Append(context.Background(), "s:appended", "ab\x00")
	// Wait for two completed flushes after the writes: the second one
	// started after they were all made, so whatever the first did not
	// carry, it did. (dirty_keys alone can read 0 while a drained batch is
	// still being written.) A sentinel write keeps something to flush.
	f0 := infoInt(info(t, rdb, "persistence"), "flushes")
	deadline := time.Now().Add(30 * time.Second)
	for n := 0; infoInt(info(t, rdb, "persistence"), "flushes") < f0+2; n++ {
		if time.Now().After(deadline) {
			t.Fatal("two flushes did not complete within 30 s")
		}
		rdb.Set(context.Background(), "s:sentinel", n, 0)
		time.Sleep(20 * time.Millisecond)
	}
	persistInfo := info(t, rdb, "persistence")
	rdb.Close()
	c.kill()
	killedLog := c.logs.String()

	c = mustLaunch(t, dir, "--proto-max-bulk-len", "1mb")
	rdb = c.client()
	checkBinary(t, rdb, vals, "after kill -9 past the flush window")
	if t.Failed() {
		t.Logf("INFO persistence before kill -9: %v\nlog of the killed process:\n%s", persistInfo, killedLog)
	}
	if t.Failed() {
		t.Logf("log:\n%s", c.logs)
	}
	rdb.Close()
	c.termOK()
}
