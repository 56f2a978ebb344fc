package main

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// windowKeys fills n window keys of every mode on rdb, with hour-long
// windows so nothing leaves them during the test: key i takes 1 + i%4
// units in each of 1 + i%3 calls.
func windowKeys(t *testing.T, rdb *redis.Client, prefix string, n int) []string {
	t.Helper()
	ctx := context.Background()
	var keys []string
	for i := range n {
		k := fmt.Sprintf("%s:%d", prefix, i)
		mode := []string{"LOG", "FIXED", "SLIDING"}[i%3]
		for range 1 + i%3 {
			if err := rdb.Do(ctx, "CL.WINDOW", k, 1000, 3_600_000, 1+i%4, mode).Err(); err != nil {
				t.Fatal(err)
			}
		}
		keys = append(keys, k)
	}
	return keys
}

// peekWindows returns each key's remaining units (a quantity-0 call) and
// its TYPE.
func peekWindows(t *testing.T, rdb *redis.Client, keys []string) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	for i, k := range keys {
		mode := []string{"LOG", "FIXED", "SLIDING"}[i%3]
		v, err := rdb.Do(ctx, "CL.WINDOW", k, 1000, 3_600_000, 0, mode).Slice()
		if err != nil {
			t.Fatalf("peek %s: %v", k, err)
		}
		typ, _ := rdb.Type(ctx, k).Result()
		out[k] = fmt.Sprint(v[:3], " ", typ)
	}
	return out
}

// TestProcessWindowPersistence: CL.WINDOW state survives SIGTERM exactly,
// and kill -9 once a flush has passed; denied calls and peeks write
// nothing (SAVE's dirty count stays 0).
func TestProcessWindowPersistence(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	c := mustLaunch(t, dir)
	rdb := c.client()
	keys := windowKeys(t, rdb, "term", 90)
	if err := rdb.Save(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	for i, k := range keys[:30] { // denied: more than what is left
		v, err := rdb.Do(ctx, "CL.WINDOW", k, 1000, 3_600_000, 1000, []string{"LOG", "FIXED", "SLIDING"}[i%3]).Slice()
		if err != nil || v[0] != int64(1) {
			t.Fatalf("%s: %v %v, want denied", k, v, err)
		}
	}
	before := peekWindows(t, rdb, keys)
	if d := info(t, rdb, "persistence")["dirty_keys"]; d != "0" {
		t.Errorf("dirty_keys %s after denied calls and peeks, want 0", d)
	}
	for k, v := range before {
		if v[len(v)-9:] != "cl.window" {
			t.Fatalf("%s: %s, want a cl.window key", k, v)
		}
	}
	c.termOK()

	c = mustLaunch(t, dir)
	rdb = c.client()
	after := peekWindows(t, rdb, keys)
	for k, b := range before {
		if after[k] != b {
			t.Errorf("after SIGTERM and a restart %s peeks %s, before %s", k, after[k], b)
		}
	}

	// kill -9 after two more flushes have completed: nothing acknowledged
	// before the first of them is lost.
	more := windowKeys(t, rdb, "kill", 60)
	want := peekWindows(t, rdb, more)
	flushes := func() int64 {
		n, _ := strconv.ParseInt(info(t, rdb, "persistence")["flushes"], 10, 64)
		return n
	}
	// A writer keeps flushes happening (a flush with nothing to write is
	// not counted); an ack received before a reading of flushes is durable
	// once two more flushes have completed (the second drained after it).
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			rdb.Do(ctx, "CL.WINDOW", "sentinel", 1_000_000_000, 3_600_000, 1, "FIXED")
		}
	}()
	f0 := flushes()
	deadline := time.Now().Add(time.Minute)
	for flushes() < f0+2 {
		if time.Now().After(deadline) {
			t.Fatal("no two flushes within a minute")
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.kill()
	close(stop)
	<-done
	c = mustLaunch(t, dir)
	rdb = c.client()
	got := peekWindows(t, rdb, more)
	for k, w := range want {
		if got[k] != w {
			t.Errorf("after kill -9 %s peeks %s, before %s", k, got[k], w)
		}
	}
	if got := peekWindows(t, rdb, keys[:3]); got[keys[0]] != before[keys[0]] {
		t.Errorf("the SIGTERM keys changed after kill -9: %v", got)
	}
}
