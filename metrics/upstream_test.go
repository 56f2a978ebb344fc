package metrics_test

import (
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/celld/celld/metrics"
)

// TestUpstreamSeries: the sidecar's series come from the snapshot
// function, and /readyz turns 503 only when the snapshot says not ready.
func TestUpstreamSeries(t *testing.T) {
	e := metrics.New(metrics.Config{})
	base := startExporter(t, e)
	var ready atomic.Bool
	ready.Store(true)
	e.SetUpstream(func() metrics.Upstream {
		return metrics.Upstream{
			State: "degraded", Ready: ready.Load(), Forwarded: 42, Errors: 3, Redirects: 1,
			Fallback: map[string]int64{"local": 7},
			Owners: []metrics.UpstreamOwner{
				{Addr: "10.0.0.1:6379", Up: true, Buckets: map[float64]uint64{0.001: 5, 0.01: 9}, Count: 10, Sum: 0.02},
				{Addr: "10.0.0.2:6379", Up: false, Buckets: map[float64]uint64{0.001: 0, 0.01: 0}},
			},
		}
	})
	fams := scrape(t, base)
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"celld_upstream_forwarded_total", nil, 42},
		{"celld_upstream_errors_total", nil, 3},
		{"celld_upstream_redirects_total", nil, 1},
		{"celld_upstream_fallback_total", map[string]string{"mode": "local"}, 7},
		{"celld_upstream_fallback_total", map[string]string{"mode": "closed"}, 0},
		{"celld_upstream_owner_up", map[string]string{"owner": "10.0.0.1:6379"}, 1},
		{"celld_upstream_owner_up", map[string]string{"owner": "10.0.0.2:6379"}, 0},
		{"celld_upstream_state", map[string]string{"state": "degraded"}, 1},
		{"celld_upstream_state", map[string]string{"state": "ok"}, 0},
	} {
		if v := number(t, fams, c.name, c.labels); v != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, v, c.want)
		}
	}
	if f := fams["celld_upstream_owner_latency_seconds"]; f == nil || len(f.Metric) != 2 || f.Metric[0].Histogram.GetSampleCount() != 10 {
		t.Errorf("latency histogram: %v", f)
	}
	get := func() (int, string) {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("X-Celld-Upstream")
	}
	if code, st := get(); code != 200 || st != "degraded" {
		t.Errorf("/readyz while ready: %d %q", code, st)
	}
	ready.Store(false)
	if code, _ := get(); code != 503 {
		t.Errorf("/readyz with the closed fallback and every owner down: %d, want 503", code)
	}
}
