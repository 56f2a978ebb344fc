package config

import (
	"strings"
	"testing"
)

// TestUpstreamIsNotItself: a sidecar whose --upstream is its own listening
// address (a copy-paste slip: both 127.0.0.1:6379) forwards every command to
// itself. It is not refused: measured with the binary (--addr and
// --upstream 127.0.0.1:17020), the topology read times out at start-up, and
// from then on the owner flaps: each probe answers (PING is answered
// locally) and logs "upstream owner answers again: forwarding resumes",
// the next decision waits the whole --upstream-timeout (0.27-0.30 s for one
// CL.THROTTLE) before "upstream owner unreachable" and the local fallback
// decides; upstream_forwarded stays 0. The flags can say so at start-up.
func TestUpstreamIsNotItself(t *testing.T) {
	for _, args := range [][]string{
		{"--addr", "127.0.0.1:17020", "--upstream", "127.0.0.1:17020"},
		{"--addr", "127.0.0.1:6379", "--upstream", "10.0.0.1:6379, 127.0.0.1:6379"},
		{"--addr", "0.0.0.0:6379", "--upstream", "127.0.0.1:6379"},
		{"--addr", "127.0.0.1:6379", "--upstream", "localhost:6379"},
	} {
		_, err := parse(t, env{}, args...)
		if err == nil || !strings.Contains(err.Error(), "--upstream") {
			t.Errorf("%q: %v, want a refusal naming --upstream (the sidecar would forward to itself)", args, err)
		}
	}
	// A different port on the same host is another server.
	mustParse(t, env{}, "--addr", "127.0.0.1:6380", "--upstream", "127.0.0.1:6379")
	// Another loopback IP on the same port is another socket: a server on
	// [::1]:6379 or 127.0.0.2:6379 beside a sidecar on 127.0.0.1:6379
	// (refused before: checked, fails without the fix).
	mustParse(t, env{}, "--addr", "127.0.0.1:6379", "--upstream", "[::1]:6379")
	mustParse(t, env{}, "--addr", "127.0.0.1:6379", "--upstream", "127.0.0.2:6379")
	mustParse(t, env{}, "--addr", "[::1]:6379", "--upstream", "127.0.0.1:6379")
	// Every address, and the same IP spelled otherwise, are this server.
	for _, args := range [][]string{
		{"--addr", ":6379", "--upstream", "[::1]:6379"},
		{"--addr", "[::]:6379", "--upstream", "127.0.0.2:6379"},
		{"--addr", "[::1]:6379", "--upstream", "[0:0:0:0:0:0:0:1]:6379"},
		{"--addr", "[::1]:6379", "--upstream", "localhost:6379"},
		{"--addr", "localhost:6379", "--upstream", "127.0.0.1:6379"},
	} {
		if _, err := parse(t, env{}, args...); err == nil {
			t.Errorf("%q accepted, want a refusal (the sidecar would forward to itself)", args)
		}
	}
}
