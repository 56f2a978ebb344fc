package main

import (
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/celld/celld/server"
	"github.com/celld/celld/store"
)

// --metrics-addr: /livez answers at once; /readyz (and /healthz) answer 503
// "loading" from start until the server is attached, then 200; /metrics
// carries the server's counters.
func TestMetricsServiceLifecycle(t *testing.T) {
	cfg, err := parseFlags([]string{"--metrics-addr", "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ms, err := startMetrics(cfg.MetricsAddr, log)
	if err != nil {
		t.Fatal(err)
	}
	defer ms.stop()
	base := "http://" + ms.ln.Addr().String()
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/livez"); code != 200 || strings.TrimSpace(body) != "ok" {
		t.Fatalf("/livez before attach: %d %q, want 200 ok", code, body)
	}
	if code, body := get("/readyz"); code != 503 || strings.TrimSpace(body) != "loading" {
		t.Fatalf("before attach: %d %q, want 503 loading", code, body)
	}
	srv, err := server.New(server.Config{Logger: log}, store.New(store.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	ms.attach(srv, nil)
	if code, body := get("/readyz"); code != 200 || strings.TrimSpace(body) != "ok" {
		t.Fatalf("after attach: %d %q", code, body)
	}
	if code, body := get("/metrics"); code != 200 || !strings.Contains(body, "celld_keys 0") {
		t.Fatalf("/metrics: %d, celld_keys missing:\n%.500s", code, body)
	}

	// Off by default.
	cfg, err = parseFlags(nil)
	if err != nil {
		t.Fatal(err)
	}
	if off, err := startMetrics(cfg.MetricsAddr, log); off != nil || err != nil {
		t.Fatalf("metrics on without --metrics-addr: %v %v", off, err)
	}
}
