package main

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/celld/celld/config"
	"github.com/celld/celld/guard"
	"github.com/celld/celld/persist"
	"github.com/celld/celld/server"
)

// TestPprofEndpoint: --pprof-addr serves Go's profile index; empty means off.
func TestPprofEndpoint(t *testing.T) {
	if ln, err := startPprof("", quietLog()); ln != nil || err != nil {
		t.Fatalf("startPprof(\"\") = %v, %v; want off", ln, err)
	}
	ln, err := startPprof("127.0.0.1:0", quietLog())
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	resp, err := http.Get("http://" + ln.Addr().String() + "/debug/pprof/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "goroutine") {
		t.Fatalf("GET /debug/pprof/ = %d %.80q", resp.StatusCode, body)
	}
	if _, err := startPprof("127.0.0.1:-1", quietLog()); err == nil {
		t.Error("startPprof on an invalid address succeeded")
	}
}

// TestConfigDefaultsMatchPackages: config (standard library only) writes
// its defaults as text; they must equal the constants of the packages
// they configure.
func TestConfigDefaultsMatchPackages(t *testing.T) {
	c := config.Defaults()
	if c.FoldMinBytes != persist.DefaultFoldMinBytes || c.BusyPoll != server.DefaultBusyPoll {
		t.Fatalf("config defaults: fold %d busy-poll %v; persist.DefaultFoldMinBytes %d, server.DefaultBusyPoll %v",
			c.FoldMinBytes, c.BusyPoll, persist.DefaultFoldMinBytes, server.DefaultBusyPoll)
	}
	if lim := guard.DefaultLimits(); c.MaxBulk != lim.MaxBulk {
		t.Fatalf("--proto-max-bulk-len default %d, guard's %d", c.MaxBulk, lim.MaxBulk)
	}
	if c.MaxMultibulk != guard.DefaultMaxArgs {
		t.Fatalf("--max-multibulk-len default %d, guard's %d", c.MaxMultibulk, guard.DefaultMaxArgs)
	}
}
