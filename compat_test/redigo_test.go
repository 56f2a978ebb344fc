package compat_test

import (
	"reflect"
	"testing"
	"time"

	redigo "github.com/gomodule/redigo/redis"
)

// redigo speaks RESP2 only: CL.THROTTLE is []interface{} of int64, error
// replies are redigo.Error holding the exact text (no prefix stripped).

func TestRedigoThrottleShapes(t *testing.T) {
	ts := startServer(t, withFakeClock(t0))
	conn := newRedigo(t, ts)

	reply, err := conn.Do("CL.THROTTLE", "user123", 15, 30, 60)
	if err != nil {
		t.Fatal(err)
	}
	arr, ok := reply.([]interface{})
	if !ok || len(arr) != 5 {
		t.Fatalf("reply %#v, want []interface{} of 5", reply)
	}
	want := []int64{0, 16, 15, -1, 2}
	for i, v := range arr {
		n, ok := v.(int64)
		if !ok || n != want[i] {
			t.Errorf("field %d = %#v (%T), want int64 %d", i, v, v, want[i])
		}
	}
	ints, err := redigo.Int64s(conn.Do("CL.THROTTLE", "user123", 15, 30, 60, 1))
	if err != nil || !reflect.DeepEqual(ints, []int64{0, 16, 14, -1, 4}) {
		t.Errorf("second call %v %v", ints, err)
	}

	errs := []struct {
		args []interface{}
		want string
	}{
		{[]interface{}{"k", 15, 30}, string(usage)},
		{[]interface{}{"k", "1.5", 30, 60}, string(parseErr("1.5"))},
		{[]interface{}{"k", 15, 0, 60}, string(zeroRate)},
		{[]interface{}{"k", 15, 1000, 1, -2}, string(expire)},
	}
	for i, e := range errs {
		_, err := conn.Do("CL.THROTTLE", e.args...)
		re, ok := err.(redigo.Error)
		if !ok || string(re) != e.want {
			t.Errorf("step %d: error %#v (%T), want redigo.Error %q", i, err, err, e.want)
		}
	}
	_, err = conn.Do("FOO", "a", "b")
	if re, ok := err.(redigo.Error); !ok || string(re) != "ERR unknown command 'FOO', with args beginning with: 'a' 'b' " {
		t.Errorf("unknown command: %#v", err)
	}
	// The connection is still in sync after the errors.
	if s, err := redigo.String(conn.Do("PING")); err != nil || s != "PONG" {
		t.Errorf("PING = %q %v", s, err)
	}
}

func TestRedigoTranscript(t *testing.T) {
	ts := startServer(t, withFakeClock(t0))
	ts.Store.Load([]byte("bad"), []byte("abc"), 0)
	send := redigoDo(newRedigo(t, ts))
	runSteps(t, ts, send, []step{
		{c("CL.THROTTLE e 5 1 10"), th(0, 6, 5, -1, 10)},
		{c("CL.THROTTLE e 5 1 10"), th(0, 6, 4, -1, 20)},
		{c("CL.THROTTLE e 5 1 10"), th(0, 6, 3, -1, 30)},
		{c("CL.THROTTLE e 5 1 10 -1"), th(0, 6, 4, -1, 20)},
		{c("GET e"), tatAt(tick + 20*time.Second)},
		{c("CL.THROTTLE bad 15 30 60"), badValue},
		{c("GET bad"), "abc"},
		{c("GET missing"), nil},
		{c("HELLO 2"), []any{"server", "redis", "version", "7.2.4", "proto", int64(2), "id", int64(1),
			"mode", "standalone", "role", "master", "modules", []any{[]any{
				"name", "redis-cell", "ver", int64(1), "path", "/usr/lib/redis/modules/libredis_cell.so", "args", []any{}}}}},
	})
}
