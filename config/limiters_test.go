package config

import (
	"strings"
	"testing"
)

// --limiter-separator, --metrics-max-limiters and --shadow
// (docs/limiter-metrics.md): flags, CELLD_* variables, bad values refused.
func TestLimiterSettings(t *testing.T) {
	c := mustParse(t, env{"CELLD_SHADOW": "new:*,login:*", "CELLD_LIMITER_SEPARATOR": "/"}, "--metrics-max-limiters", "0")
	if c.Shadow != "new:*,login:*" || c.LimiterSeparator != "/" || c.MetricsMaxLimiters != 0 {
		t.Fatalf("got shadow %q, separator %q, max %d", c.Shadow, c.LimiterSeparator, c.MetricsMaxLimiters)
	}
	c = mustParse(t, env{"CELLD_METRICS_MAX_LIMITERS": "10000"}, "--shadow", "a*")
	if c.MetricsMaxLimiters != 10000 || c.Shadow != "a*" {
		t.Fatalf("got max %d, shadow %q", c.MetricsMaxLimiters, c.Shadow)
	}
	for _, tc := range []struct {
		e    env
		args []string
		want []string
	}{
		{nil, []string{"--limiter-separator", ""}, []string{"--limiter-separator", "CELLD_LIMITER_SEPARATOR", "non-empty"}},
		{nil, []string{"--metrics-max-limiters", "10001"}, []string{"--metrics-max-limiters", `"10001"`}},
		{env{"CELLD_METRICS_MAX_LIMITERS": "-1"}, nil, []string{"CELLD_METRICS_MAX_LIMITERS", `"-1"`}},
		{env{"CELLD_METRICS_MAX_LIMITERS": "many"}, nil, []string{"CELLD_METRICS_MAX_LIMITERS", `"many"`}},
	} {
		_, err := parse(t, tc.e, tc.args...)
		if err == nil {
			t.Errorf("%v %q accepted", tc.e, tc.args)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v %q: error %q does not say %q", tc.e, tc.args, err, w)
			}
		}
	}
}
