package config

import (
	"strings"
	"testing"
	"time"
)

// The sidecar flags: accepted forms, the environment, and every refusal
// names the flag at fault.
func TestUpstreamSettings(t *testing.T) {
	c := mustParse(t, env{"CELLD_UPSTREAM": "10.0.0.1:6379, celld-0.celld:6379", "CELLD_UPSTREAM_FALLBACK": "CLOSED"},
		"--upstream-timeout", "100ms", "--upstream-tls", "yes", "--upstream-tls-ca", "/ca.pem")
	if got := c.UpstreamSeeds(); len(got) != 2 || got[0] != "10.0.0.1:6379" || got[1] != "celld-0.celld:6379" {
		t.Fatalf("seeds %q", got)
	}
	if c.UpstreamFallback != "closed" || c.UpstreamTimeout != 100*time.Millisecond || !c.UpstreamTLS {
		t.Fatalf("parsed %+v", c)
	}
	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"--upstream", "nohost"}, "upstream"},
		{[]string{"--upstream", "a:1,b"}, "upstream"},
		{[]string{"--upstream", "a:1", "--upstream-fallback", "maybe"}, "upstream-fallback"},
		{[]string{"--upstream", "a:1", "--upstream-timeout", "0"}, "upstream-timeout"},
		{[]string{"--upstream-tls", "yes"}, "need --upstream"},
		{[]string{"--upstream-password-file", "/p"}, "need --upstream"},
		{[]string{"--upstream", "a:1", "--upstream-tls-ca", "/ca"}, "--upstream-tls yes"},
		{[]string{"--upstream", "a:1", "--upstream-tls", "yes", "--upstream-tls-cert", "/c"}, "go together"},
		{[]string{"--upstream", "a:1", "--cluster-nodes", "a:1"}, "exclude each other"},
	} {
		_, err := parse(t, env{}, bad.args...)
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%q: %v, want an error about %s", bad.args, err, bad.want)
		}
	}
}
