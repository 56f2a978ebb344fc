package metrics_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/celld/celld/metrics"
	"github.com/celld/celld/server"
	"github.com/celld/celld/store"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// startServer runs a celld server on 127.0.0.1:0, the httptest way.
func startServer(t *testing.T) (*server.Server, string) {
	t.Helper()
	srv, err := server.New(server.Config{Addr: "127.0.0.1:0"}, store.New(store.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
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
	return srv, ln.Addr().String()
}

// startExporter serves e on 127.0.0.1:0 and returns its base URL.
func startExporter(t *testing.T, e *metrics.Exporter) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- e.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := e.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return "http://" + ln.Addr().String()
}

// send writes one command on a RESP connection and reads one reply line
// (enough for the integer and array-of-integers replies used here).
func send(t *testing.T, conn net.Conn, r *bufio.Reader, args ...string) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(conn, b.String()); err != nil {
		t.Fatal(err)
	}
	line, err := r.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	if line[0] == '*' { // CL.THROTTLE: five integers
		var out strings.Builder
		out.WriteString(line)
		for i := 0; i < 5; i++ {
			l, err := r.ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			out.WriteString(l)
		}
		return out.String()
	}
	return line
}

func scrape(t *testing.T, base string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

// value finds the sample of family name whose labels include want.
func value(t *testing.T, fams map[string]*dto.MetricFamily, name string, want map[string]string) (*dto.Metric, bool) {
	t.Helper()
	f := fams[name]
	if f == nil {
		return nil, false
	}
next:
	for _, m := range f.GetMetric() {
		for k, v := range want {
			found := false
			for _, lp := range m.GetLabel() {
				if lp.GetName() == k && lp.GetValue() == v {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		return m, true
	}
	return nil, false
}

func number(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	t.Helper()
	m, ok := value(t, fams, name, labels)
	if !ok {
		t.Fatalf("no %s%v in the scrape", name, labels)
	}
	switch {
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	}
	t.Fatalf("%s is neither counter nor gauge", name)
	return 0
}

func TestMetricsMoveWithThrottle(t *testing.T) {
	srv, addr := startServer(t)
	e := metrics.New(metrics.Config{Version: "test"})
	e.SetStats(srv.Stats)
	base := startExporter(t, e)

	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	r := bufio.NewReader(conn)
	// A reply means the server has registered the connection (accepting
	// and registering happen after the client's Dial returns).
	if got := send(t, conn, r, "PING"); got != "+PONG\r\n" {
		t.Fatalf("PING: %q", got)
	}

	before := scrape(t, base)
	if m, ok := value(t, before, "celld_decisions_total", map[string]string{"decision": "allowed"}); ok {
		t.Fatalf("allowed before any call = %v (a limiter's series appears with its first decision)", m)
	}
	if v := number(t, before, "celld_connected_clients", nil); v != 1 {
		t.Errorf("connected_clients = %v, want 1", v)
	}

	// Two allowed, one denied (burst 1: two tokens), one parse error.
	for i, want := range []string{":0", ":0", ":1"} {
		if got := send(t, conn, r, "CL.THROTTLE", "m", "1", "1", "60"); !strings.HasPrefix(got, "*5\r\n"+want+"\r\n") {
			t.Fatalf("call %d: %q", i, got)
		}
	}
	if got := send(t, conn, r, "CL.THROTTLE", "m", "x", "1", "60"); !strings.HasPrefix(got, "-Cell error") {
		t.Fatalf("bad call: %q", got)
	}
	send(t, conn, r, "GET") // rejected: wrong arity

	after := scrape(t, base)
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"celld_decisions_total", map[string]string{"command": "cl.throttle", "decision": "allowed", "limiter": ""}, 2},
		{"celld_decisions_total", map[string]string{"command": "cl.throttle", "decision": "denied", "limiter": ""}, 1},
		{"celld_decisions_total", map[string]string{"command": "cl.throttle", "decision": "shadow_denied", "limiter": ""}, 0},
		{"celld_near_limit_total", map[string]string{"command": "cl.throttle", "limiter": ""}, 1}, // the 2nd call left 0 of 2
		{"celld_commands_total", map[string]string{"command": "cl.throttle"}, 4},
		{"celld_command_failed_total", map[string]string{"command": "cl.throttle"}, 1},
		{"celld_command_rejected_total", map[string]string{"command": "get"}, 1},
		{"celld_errors_total", map[string]string{"kind": "Cell"}, 1},
		{"celld_errors_total", map[string]string{"kind": "ERR"}, 1},
		{"celld_keys", nil, 1},
		{"celld_connected_clients", nil, 1},
		{"celld_connections_received_total", nil, 1},
		{"celld_loading", nil, 0},
		{"celld_build_info", map[string]string{"version": "test"}, 1},
	} {
		if got := number(t, after, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	h, ok := value(t, after, "celld_command_duration_seconds", map[string]string{"command": "cl.throttle"})
	if !ok || h.Histogram == nil {
		t.Fatal("no latency histogram for cl.throttle")
	}
	if n := h.GetHistogram().GetSampleCount(); n != 4 {
		t.Errorf("cl.throttle duration sample count = %d, want 4 (every early call is timed)", n)
	}
	if s := h.GetHistogram().GetSampleSum(); s <= 0 || s > 1 {
		t.Errorf("cl.throttle duration sum = %vs", s)
	}
	if _, ok := after["go_goroutines"]; !ok {
		t.Error("no Go runtime metrics")
	}
}

// The probes: /livez always, /readyz (and its alias /healthz) only after
// loading and before shutting down, and never failed by persistence, which
// /healthz/persistence reports on its own.
func TestHealthEndpoints(t *testing.T) {
	e := metrics.New(metrics.Config{})
	base := startExporter(t, e)
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.TrimSpace(string(b))
	}
	want := func(step string, path string, code int, body string) {
		t.Helper()
		if c, b := get(path); c != code || b != body {
			t.Errorf("%s: GET %s = %d %q, want %d %q", step, path, c, b, code, body)
		}
	}
	for _, p := range []string{"/livez", "/readyz", "/healthz", "/healthz/persistence"} {
		want("idle", p, 200, "ok")
	}
	e.SetLoading(true)
	want("loading", "/livez", 200, "ok")
	want("loading", "/readyz", 503, "loading")
	want("loading", "/healthz", 503, "loading")
	if v := number(t, scrape(t, base), "celld_loading", nil); v != 1 {
		t.Errorf("celld_loading = %v while loading", v)
	}
	e.SetLoading(false)
	want("after loading", "/readyz", 200, "ok")

	var failing error
	e.SetHealth(func() error { return failing })
	failing = errors.New("persistence failing: disk full")
	want("persistence failing", "/healthz/persistence", 503, "persistence failing: disk full")
	want("persistence failing", "/readyz", 200, "ok")
	want("persistence failing", "/healthz", 200, "ok")
	want("persistence failing", "/livez", 200, "ok")
	failing = nil
	want("recovered", "/healthz/persistence", 200, "ok")

	e.SetShuttingDown()
	want("shutting down", "/readyz", 503, "shutting down")
	want("shutting down", "/livez", 200, "ok")
}

func TestPersistenceMetrics(t *testing.T) {
	e := metrics.New(metrics.Config{})
	last := time.Now().Add(-3 * time.Second)
	e.SetPersistence(func() metrics.Persistence {
		return metrics.Persistence{
			LastFlushOK: true, LastFlushDuration: 2 * time.Millisecond, LastSuccessAt: last,
			Flushes: 7, FlushErrors: 1, DirtyKeys: 5,
			RestoreDuration: 1500 * time.Millisecond, RestoreKeys: 42,
			BaseRewrites: 3, BaseErrors: 2, LogBytes: 4096,
			PendingKeys: 11, PendingBytes: 3300, DamagedRecords: 1,
		}
	})
	fams := scrape(t, startExporter(t, e))
	for name, want := range map[string]float64{
		"celld_persist_last_flush_duration_seconds": 0.002,
		"celld_persist_last_flush_ok":               1,
		"celld_persist_flushes_total":               7,
		"celld_persist_flush_errors_total":          1,
		"celld_persist_dirty_keys":                  5,
		"celld_persist_restore_duration_seconds":    1.5,
		"celld_persist_restore_keys":                42,
		"celld_persist_base_rewrites_total":         3,
		"celld_persist_base_rewrite_errors_total":   2,
		"celld_persist_log_bytes":                   4096,
		"celld_persist_pending_keys":                11,
		"celld_persist_pending_bytes":               3300,
		"celld_persist_damaged_records":             1,
	} {
		if got := number(t, fams, name, nil); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if age := number(t, fams, "celld_persist_last_flush_age_seconds", nil); age < 3 || age > 60 {
		t.Errorf("flush age = %vs, want about 3", age)
	}
}
