package metrics

import (
	"strings"

	"github.com/celld/celld/server"
	"github.com/prometheus/client_golang/prometheus"
)

// collectLimiters turns the server's per-limiter decision counts into
// celld_decisions_total{command,decision,limiter} and
// celld_near_limit_total{command,limiter}. Every (command, limiter) pair
// that has decided anything gets all three decisions (zeros included), so
// a reject-rate ratio has both sides from the first decision.
//
// Limiter names come from keys: bytes that are not UTF-8 are replaced (a
// Prometheus label must be UTF-8), and rows that then share a name — or a
// real limiter called "other" and the overflow — are added together, so a
// scrape never carries the same series twice. The server bounds the rows
// (--metrics-max-limiters), so a scrape costs O(limiters × commands).
func collectLimiters(ch chan<- prometheus.Metric, rows []server.LimiterDecisions) {
	type key struct{ limiter, command string }
	sums := make(map[key]*server.LimiterDecisions, len(rows))
	order := make([]key, 0, len(rows))
	for _, r := range rows {
		k := key{strings.ToValidUTF8(r.Limiter, "\uFFFD"), r.Command}
		s, ok := sums[k]
		if !ok {
			s = &server.LimiterDecisions{Limiter: k.limiter, Command: k.command}
			sums[k] = s
			order = append(order, k)
		}
		s.Allowed += r.Allowed
		s.Denied += r.Denied
		s.ShadowDenied += r.ShadowDenied
		s.NearLimit += r.NearLimit
	}
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	for _, k := range order {
		s := sums[k]
		counter(descDecisions, s.Allowed, s.Command, "allowed", s.Limiter)
		counter(descDecisions, s.Denied, s.Command, "denied", s.Limiter)
		counter(descDecisions, s.ShadowDenied, s.Command, "shadow_denied", s.Limiter)
		counter(descNearLimit, s.NearLimit, s.Command, s.Limiter)
	}
}
