package metrics

import (
	"errors"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
)

// Sidecar mode's series (--upstream, docs/sidecar.md):
//
//	upstream_forwarded_total                commands answered by their owner
//	upstream_fallback_total{mode}           commands decided by the fallback (local, open, closed)
//	upstream_errors_total                   dials, sends or replies that failed or timed out
//	upstream_redirects_total                MOVED/ASK followed
//	upstream_owner_up{owner}                1 while the owner answers
//	upstream_owner_latency_seconds{owner}   histogram: one owner's share of a forwarded pipeline
//	upstream_state{state}                   1 for the current state (ok, degraded, down)

// Upstream is a snapshot of the sidecar's forwarding (main converts the
// sidecar package's figures: this package does not import it).
type Upstream struct {
	State     string // "ok", "degraded" or "down"
	Ready     bool   // false turns /readyz to 503 ("closed" fallback with every owner down)
	Forwarded int64
	Fallback  map[string]int64 // by mode
	Errors    int64
	Redirects int64
	Owners    []UpstreamOwner
}

// UpstreamOwner is one owner's reachability and latency histogram.
type UpstreamOwner struct {
	Addr    string
	Up      bool
	Buckets map[float64]uint64 // upper bound in seconds → cumulative count
	Count   uint64
	Sum     float64 // seconds
}

var (
	descUpForwarded = prometheus.NewDesc("celld_upstream_forwarded_total", "Commands (a transaction counts one) answered by their upstream owner.", nil, nil)
	descUpFallback  = prometheus.NewDesc("celld_upstream_fallback_total", "Commands decided by the fallback while their owner could not be reached, by mode.", []string{"mode"}, nil)
	descUpErrors    = prometheus.NewDesc("celld_upstream_errors_total", "Dials, sends or replies to an upstream owner that failed or timed out.", nil, nil)
	descUpRedirects = prometheus.NewDesc("celld_upstream_redirects_total", "MOVED/ASK replies followed.", nil, nil)
	descUpOwnerUp   = prometheus.NewDesc("celld_upstream_owner_up", "1 while the upstream owner answers, 0 while the fallback decides its keys.", []string{"owner"}, nil)
	descUpLatency   = prometheus.NewDesc("celld_upstream_owner_latency_seconds", "One owner's share of a forwarded pipeline, send to last reply.", []string{"owner"}, nil)
	descUpState     = prometheus.NewDesc("celld_upstream_state", "1 for the upstream's current state: ok, degraded (some owners down) or down.", []string{"state"}, nil)
)

// SetUpstream turns on the sidecar series and the upstream check of
// /readyz; fn is called once per scrape or probe. Call it once.
func (e *Exporter) SetUpstream(fn func() Upstream) {
	e.upstream.Store(&fn)
	e.reg.MustRegister((*upstreamCollector)(e))
}

// upstreamReady is /readyz's upstream verdict: nil, or why not.
func (e *Exporter) upstreamReady(w http.ResponseWriter) error {
	p := e.upstream.Load()
	if p == nil {
		return nil
	}
	u := (*p)()
	w.Header().Set("X-Celld-Upstream", u.State)
	if !u.Ready {
		return errors.New("upstream " + u.State + " and --upstream-fallback closed")
	}
	return nil
}

type upstreamCollector Exporter

func (c *upstreamCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descUpForwarded, descUpFallback, descUpErrors, descUpRedirects, descUpOwnerUp, descUpLatency, descUpState} {
		ch <- d
	}
}

func (c *upstreamCollector) Collect(ch chan<- prometheus.Metric) {
	p := (*Exporter)(c).upstream.Load()
	if p == nil {
		return
	}
	u := (*p)()
	counter := func(d *prometheus.Desc, v int64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), l...)
	}
	counter(descUpForwarded, u.Forwarded)
	for _, m := range []string{"local", "open", "closed"} {
		counter(descUpFallback, u.Fallback[m], m)
	}
	counter(descUpErrors, u.Errors)
	counter(descUpRedirects, u.Redirects)
	for _, s := range []string{"ok", "degraded", "down"} {
		v := 0.0
		if s == u.State {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(descUpState, prometheus.GaugeValue, v, s)
	}
	for _, o := range u.Owners {
		up := 0.0
		if o.Up {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(descUpOwnerUp, prometheus.GaugeValue, up, o.Addr)
		ch <- prometheus.MustNewConstHistogram(descUpLatency, o.Count, o.Sum, o.Buckets, o.Addr)
	}
}
