package compat_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/celld/celld/metrics"
	"github.com/celld/celld/server"
	"github.com/redis/go-redis/v9"
)

// Decisions per limiter, shadow mode and near-limit (issue 20,
// docs/limiter-metrics.md), through go-redis over a real socket, read back
// by scraping /metrics over HTTP.

// withLimiters sets the limiter table's bound, separator and shadow
// patterns.
func withLimiters(max int, sep, shadow string) option {
	return func(c *server.Config, _ *testServer) {
		c.MetricsMaxLimiters, c.LimiterSeparator, c.Shadow = max, sep, shadow
	}
}

// scrapeMetrics serves ts's metrics on an httptest server and returns a
// function that GETs /metrics and returns the body.
func scrapeMetrics(t *testing.T, ts *testServer) func() string {
	e := metrics.New(metrics.Config{})
	e.SetStats(ts.Srv.Stats)
	hs := httptest.NewServer(e.Handler())
	t.Cleanup(hs.Close)
	return func() string {
		t.Helper()
		resp, err := http.Get(hs.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("/metrics: %d %v", resp.StatusCode, err)
		}
		return string(b)
	}
}

func wantLines(t *testing.T, body string, lines ...string) {
	t.Helper()
	for _, l := range lines {
		if !strings.Contains(body, "\n"+l+"\n") {
			t.Errorf("/metrics lacks %s", l)
		}
	}
}

func TestLimiterMetricsOverHTTP(t *testing.T) {
	ts := startServer(t, withFakeClock(t0), withLimiters(4, ":", "dry:*"))
	scrape := scrapeMetrics(t, ts)
	rdb := newGoRedis(t, ts)
	ctx := context.Background()
	do := func(args ...any) []int64 {
		t.Helper()
		v, err := rdb.Do(ctx, args...).Int64Slice()
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		return v
	}
	// api: burst 4 (limit 5): 5 allowed (the last near the limit:
	// remaining 0 of 5; 1 of 5 is 20%, not less), then 2 denied.
	for i := range 7 {
		r := do("CL.THROTTLE", "api:user:1", 4, 1, 60)
		if want := int64(0); i >= 5 {
			want = 1
			if r[0] != want {
				t.Fatalf("api call %d: %v", i, r)
			}
		}
	}
	// dry: shadowed, limit 1: one allowed, then three answered as allowed.
	do("CL.THROTTLE", "dry:user:1", 0, 1, 60)
	for range 3 {
		if r := do("CL.THROTTLE", "dry:user:1", 0, 1, 60); r[0] != 0 || r[1] != 1 || r[2] != 0 || r[3] != -1 || r[4] < 59 {
			t.Fatalf("shadowed denial answered %v, want [0 1 0 -1 ~60]", r)
		}
	}
	do("CL.PTHROTTLE", "nosep", 9, 1, 1000) // limiter ""
	do("CL.THROTTLE", "login:ip", 9, 1, 60)
	// Counted once, under the limiter of the group that bound the verdict.
	if err := rdb.Do(ctx, "CL.MTHROTTLE", "login:ip", 9, 1, 60, 1, "dry:user:1", 0, 1, 60, 1).Err(); err != nil {
		t.Fatal(err)
	}
	// The table holds 4 names (api, dry, "", login): the rest are "other".
	for i := range 5 {
		do("CL.THROTTLE", fmt.Sprintf("hostile%d:k", i), 0, 1, 60)
	}
	do("CL.THROTTLE", "other:k", 0, 1, 60) // a key naming "other": added to the overflow row

	body := scrape()
	wantLines(t, body,
		`celld_decisions_total{command="cl.throttle",decision="allowed",limiter="api"} 5`,
		`celld_decisions_total{command="cl.throttle",decision="denied",limiter="api"} 2`,
		`celld_decisions_total{command="cl.throttle",decision="shadow_denied",limiter="api"} 0`,
		`celld_near_limit_total{command="cl.throttle",limiter="api"} 1`,
		`celld_decisions_total{command="cl.throttle",decision="allowed",limiter="dry"} 1`,
		`celld_decisions_total{command="cl.throttle",decision="denied",limiter="dry"} 0`,
		`celld_decisions_total{command="cl.throttle",decision="shadow_denied",limiter="dry"} 3`,
		`celld_decisions_total{command="cl.pthrottle",decision="allowed",limiter=""} 1`,
		`celld_decisions_total{command="cl.mthrottle",decision="shadow_denied",limiter="dry"} 1`,
		`celld_decisions_total{command="cl.throttle",decision="allowed",limiter="other"} 6`,
	)
	if strings.Contains(body, "hostile") {
		t.Errorf("names past --metrics-max-limiters reached /metrics:\n%s", grepLines(body, "celld_decisions_total", "celld_near"))
	}

	// INFO limiters: top limiters by denials.
	info, err := rdb.Info(ctx, "limiters").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"limiters:4", "limiters_max:4", "shadow:dry:*",
		"top_denied_1:limiter=dry,allowed=1,denied=0,shadow_denied=4,near_limit=1"} {
		if !strings.Contains(info, want) {
			t.Errorf("INFO limiters lacks %q:\n%s", want, info)
		}
	}

	// Enforce at run time: the same call is now denied.
	if err := rdb.ConfigSet(ctx, "shadow", "").Err(); err != nil {
		t.Fatal(err)
	}
	if r := do("CL.THROTTLE", "dry:user:1", 0, 1, 60); r[0] != 1 {
		t.Fatalf("after CONFIG SET shadow '': %v", r)
	}
	if err := rdb.ConfigSet(ctx, "shadow", "dry:*,api:*").Err(); err != nil {
		t.Fatal(err)
	}
	if got, err := rdb.ConfigGet(ctx, "shadow").Result(); err != nil || got["shadow"] != "dry:*,api:*" {
		t.Fatalf("CONFIG GET shadow = %v, %v", got, err)
	}
	if r := do("CL.THROTTLE", "api:user:1", 4, 1, 60); r[0] != 0 || r[2] != 0 || r[3] != -1 {
		t.Fatalf("api shadowed at run time: %v", r)
	}
	wantLines(t, scrape(),
		`celld_decisions_total{command="cl.throttle",decision="denied",limiter="dry"} 1`,
		`celld_decisions_total{command="cl.throttle",decision="shadow_denied",limiter="api"} 1`)
}

// A shadowed denial writes nothing, so it neither aborts a WATCH nor
// invalidates a tracked key; an allowed call on the same key does both.
func TestShadowIsNotAWrite(t *testing.T) {
	ts := startServer(t, withLimiters(0, "", "dry:*"))
	ctx := context.Background()
	rdb := newGoRedis(t, ts)
	other := newGoRedis(t, ts)
	if err := rdb.Do(ctx, "CL.THROTTLE", "dry:k", 0, 1, 3600).Err(); err != nil {
		t.Fatal(err)
	}
	watchRun := func(write func()) error {
		return rdb.Watch(ctx, func(tx *redis.Tx) error {
			write()
			_, err := tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
				p.Ping(ctx)
				return nil
			})
			return err
		}, "dry:k")
	}
	if err := watchRun(func() { other.Do(ctx, "CL.THROTTLE", "dry:k", 0, 1, 3600) }); err != nil {
		t.Fatalf("a shadowed denial aborted WATCH: %v", err)
	}
	if err := watchRun(func() { other.Do(ctx, "CL.THROTTLE", "dry:k", 0, 1, 3600, 0) }); err != redis.TxFailedErr {
		t.Fatalf("an allowed write (quantity 0) did not abort WATCH: %v", err)
	}
	if err := watchRun(func() {
		other.Do(ctx, "CL.MTHROTTLE", "dry:k", 0, 1, 3600, 1)
	}); err != nil {
		t.Fatalf("a shadowed CL.MTHROTTLE aborted WATCH: %v", err)
	}
}

// grepLines returns body's lines that start with one of prefixes.
func grepLines(body string, prefixes ...string) string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		for _, p := range prefixes {
			if strings.HasPrefix(l, p) {
				out = append(out, l)
			}
		}
	}
	return strings.Join(out, "\n")
}
