package ratelimit

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/celld/celld/server"
	"github.com/celld/celld/store"
	"github.com/redis/go-redis/v9"
)

// startCelld serves a memory-only celld on 127.0.0.1:0 for the test.
func startCelld(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, store.New(store.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		<-done
	})
	return ln.Addr().String()
}

func TestThrottle(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: startCelld(t)})
	defer rdb.Close()
	ctx := context.Background()
	// The README's session: 30 per 60 s, bursts of 16.
	l := Limit{Burst: 15, Count: 30, Period: 60}
	d, err := Throttle(ctx, rdb, "user123", l, 1)
	if err != nil || d != (Decision{Limited: false, Limit: 16, Remaining: 15, RetryAfter: -1, ResetAfter: 2}) {
		t.Fatalf("first call: %+v, %v", d, err)
	}
	// A request bigger than the bucket can never pass: retry -1.
	if d, err = Throttle(ctx, rdb, "big", l, 17); err != nil || !d.Limited || d.RetryAfter != -1 {
		t.Fatalf("quantity 17 of 16: %+v, %v", d, err)
	}
	// CL.THROTTLE's errors come back as errors.
	if _, err := Throttle(ctx, rdb, "k", Limit{Burst: 15, Count: 0, Period: 60}, 1); err == nil ||
		err.Error() != "Cell error: Store error: Zero rates are not supported" {
		t.Fatalf("zero rate: %v", err)
	}
}

func TestMiddlewareHeaders(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: startCelld(t)})
	defer rdb.Close()
	// 1 request per minute, bursts of 3.
	l := Limit{Burst: 2, Count: 1, Period: 60}
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "hello") })
	h := Middleware(rdb, l, func(r *http.Request) string { return "ip:" + r.RemoteAddr }, false, ok)
	call := func() *http.Response {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "/", nil)
		req.RemoteAddr = "192.0.2.1"
		h.ServeHTTP(rec, req)
		return rec.Result()
	}
	for i, want := range []struct {
		code                    int
		remaining, reset, retry string
	}{
		{200, "2", "60", ""},
		{200, "1", "120", ""},
		{200, "0", "180", ""},
		{429, "0", "180", "60"},
	} {
		resp := call()
		got := struct {
			code                    int
			remaining, reset, retry string
		}{resp.StatusCode, resp.Header.Get("RateLimit-Remaining"), resp.Header.Get("RateLimit-Reset"), resp.Header.Get("Retry-After")}
		if got != want {
			t.Errorf("request %d: %+v, want %+v", i+1, got, want)
		}
		if resp.Header.Get("RateLimit-Limit") != "3" || resp.Header.Get("RateLimit-Policy") != "3;w=180" {
			t.Errorf("request %d: limit %q policy %q", i+1, resp.Header.Get("RateLimit-Limit"), resp.Header.Get("RateLimit-Policy"))
		}
	}
}

// With celld unreachable, fail-open serves the request and fail-closed
// answers 503.
func TestMiddlewareFailOpenClosed(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer rdb.Close()
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "hello") })
	key := func(*http.Request) string { return "k" }
	for _, tc := range []struct {
		failOpen bool
		code     int
	}{{true, 200}, {false, 503}} {
		rec := httptest.NewRecorder()
		Middleware(rdb, Limit{Burst: 1, Count: 1, Period: 1}, key, tc.failOpen, ok).ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
		if rec.Code != tc.code {
			t.Errorf("failOpen %v: %d, want %d", tc.failOpen, rec.Code, tc.code)
		}
	}
}
