package main

import (
	"github.com/celld/celld/server"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

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

// flagCase is one flag's contract: its default, values it takes and
// refuses, and an environment value that sets it.
type flagCase struct {
	flag, env string
	get       func(config) any
	def       any
	ok, bad   []string
	envVal    string
	envWant   any
}

// check parses with no arguments (the default), each ok and bad value, the
// environment value, and garbage in the environment, which must be an
// error naming the variable.
func (fc flagCase) check(t *testing.T) {
	t.Helper()
	if c, err := parseFlags(nil); err != nil || fc.get(c) != fc.def {
		t.Fatalf("default: %v, %v; want %v", fc.get(c), err, fc.def)
	}
	for _, v := range fc.ok {
		if _, err := parseFlags([]string{fc.flag, v}); err != nil {
			t.Errorf("%s %s: %v", fc.flag, v, err)
		}
	}
	for _, v := range fc.bad {
		if _, err := parseFlags([]string{fc.flag, v}); err == nil {
			t.Errorf("%s %s accepted", fc.flag, v)
		}
	}
	t.Setenv(fc.env, fc.envVal)
	if c, err := parseFlags(nil); err != nil || fc.get(c) != fc.envWant {
		t.Fatalf("%s=%s: %v, %v", fc.env, fc.envVal, fc.get(c), err)
	}
	t.Setenv(fc.env, "x")
	if _, err := parseFlags(nil); err == nil || !strings.Contains(err.Error(), fc.env) {
		t.Errorf("a bad %s: %v, want an error naming it", fc.env, err)
	}
}

// TestIOLoopsFlag: --io-loops defaults to 1, reads CELLD_IO_LOOPS, takes 0
// (a goroutine per connection) and refuses negatives, over 64 and garbage.
func TestIOLoopsFlag(t *testing.T) {
	flagCase{flag: "--io-loops", env: "CELLD_IO_LOOPS", get: func(c config) any { return c.ioLoops },
		def: 1, ok: []string{"0", "2", "64"}, bad: []string{"-1", "65", "many"}, envVal: "0", envWant: 0}.check(t)
}

// TestBusyPollFlag: --busy-poll defaults to server.DefaultBusyPoll, reads
// CELLD_BUSY_POLL, takes 0 (never) and refuses negatives, over 1s and
// garbage.
func TestBusyPollFlag(t *testing.T) {
	flagCase{flag: "--busy-poll", env: "CELLD_BUSY_POLL", get: func(c config) any { return c.busyPoll },
		def: server.DefaultBusyPoll, ok: []string{"0", "10us", "1s"}, bad: []string{"-1us", "2s", "soon"},
		envVal: "0", envWant: time.Duration(0)}.check(t)
}
