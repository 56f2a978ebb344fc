package main

import (
	"github.com/celld/celld/server"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/celld/celld/persist"
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

// TestPersistTuningFlags: --log-fold-min-bytes defaults to persist's
// default, reads CELLD_LOG_FOLD_MIN_BYTES, and refuses 0, negatives and
// garbage; --pprof-addr reads CELLD_PPROF_ADDR.
func TestPersistTuningFlags(t *testing.T) {
	c, err := parseFlags(nil)
	if err != nil || c.foldMinBytes != persist.DefaultFoldMinBytes || c.pprofAddr != "" {
		t.Fatalf("defaults: fold %d pprof %q err %v", c.foldMinBytes, c.pprofAddr, err)
	}
	if c, err = parseFlags([]string{"--log-fold-min-bytes", "65536"}); err != nil || c.foldMinBytes != 65536 {
		t.Fatalf("--log-fold-min-bytes 65536: %d, %v", c.foldMinBytes, err)
	}
	for _, bad := range []string{"0", "-5", "lots"} {
		if _, err := parseFlags([]string{"--log-fold-min-bytes", bad}); err == nil {
			t.Errorf("--log-fold-min-bytes %s accepted", bad)
		}
	}
	t.Setenv("CELLD_LOG_FOLD_MIN_BYTES", "4096")
	t.Setenv("CELLD_PPROF_ADDR", "127.0.0.1:6060")
	if c, err = parseFlags(nil); err != nil || c.foldMinBytes != 4096 || c.pprofAddr != "127.0.0.1:6060" {
		t.Fatalf("from the environment: fold %d pprof %q err %v", c.foldMinBytes, c.pprofAddr, err)
	}
	t.Setenv("CELLD_LOG_FOLD_MIN_BYTES", "x")
	if _, err := parseFlags(nil); err == nil || !strings.Contains(err.Error(), "CELLD_LOG_FOLD_MIN_BYTES") {
		t.Errorf("a bad CELLD_LOG_FOLD_MIN_BYTES: %v, want an error naming it", err)
	}
}

// TestIOLoopsFlag: --io-loops defaults to 1, reads CELLD_IO_LOOPS, takes 0
// (a goroutine per connection) and refuses negatives, over 64 and garbage.
func TestIOLoopsFlag(t *testing.T) {
	if c, err := parseFlags(nil); err != nil || c.ioLoops != 1 {
		t.Fatalf("default: %d, %v", c.ioLoops, err)
	}
	for _, ok := range []string{"0", "2", "64"} {
		if _, err := parseFlags([]string{"--io-loops", ok}); err != nil {
			t.Errorf("--io-loops %s: %v", ok, err)
		}
	}
	for _, bad := range []string{"-1", "65", "many"} {
		if _, err := parseFlags([]string{"--io-loops", bad}); err == nil {
			t.Errorf("--io-loops %s accepted", bad)
		}
	}
	t.Setenv("CELLD_IO_LOOPS", "0")
	if c, err := parseFlags(nil); err != nil || c.ioLoops != 0 {
		t.Fatalf("CELLD_IO_LOOPS=0: %d, %v", c.ioLoops, err)
	}
	t.Setenv("CELLD_IO_LOOPS", "x")
	if _, err := parseFlags(nil); err == nil || !strings.Contains(err.Error(), "CELLD_IO_LOOPS") {
		t.Errorf("a bad CELLD_IO_LOOPS: %v, want an error naming it", err)
	}
}

// TestBusyPollFlag: --busy-poll defaults to server.DefaultBusyPoll, reads
// CELLD_BUSY_POLL, takes 0 (never) and refuses negatives, over 1s and
// garbage.
func TestBusyPollFlag(t *testing.T) {
	if c, err := parseFlags(nil); err != nil || c.busyPoll != server.DefaultBusyPoll {
		t.Fatalf("default: %v, %v", c.busyPoll, err)
	}
	for _, ok := range []string{"0", "10us", "1s"} {
		if _, err := parseFlags([]string{"--busy-poll", ok}); err != nil {
			t.Errorf("--busy-poll %s: %v", ok, err)
		}
	}
	for _, bad := range []string{"-1us", "2s", "soon"} {
		if _, err := parseFlags([]string{"--busy-poll", bad}); err == nil {
			t.Errorf("--busy-poll %s accepted", bad)
		}
	}
	t.Setenv("CELLD_BUSY_POLL", "0")
	if c, err := parseFlags(nil); err != nil || c.busyPoll != 0 {
		t.Fatalf("CELLD_BUSY_POLL=0: %v, %v", c.busyPoll, err)
	}
	t.Setenv("CELLD_BUSY_POLL", "x")
	if _, err := parseFlags(nil); err == nil || !strings.Contains(err.Error(), "CELLD_BUSY_POLL") {
		t.Errorf("a bad CELLD_BUSY_POLL: %v, want an error naming it", err)
	}
}
