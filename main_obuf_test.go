package main

import (
	"strings"
	"testing"

	"github.com/celld/celld/config"
)

func TestOutputBufferFlag(t *testing.T) {
	c, err := parseFlags(nil)
	if err != nil || c.OutputBufferLimit != (config.OutputBufferLimit{}) {
		t.Fatalf("default: %+v, %v; want no limit", c.OutputBufferLimit, err)
	}
	c, err = parseFlags([]string{"--client-output-buffer-limit", "normal 64mb 16mb 60"})
	if want := (config.OutputBufferLimit{Hard: 64 << 20, Soft: 16 << 20, SoftSeconds: 60}); err != nil || c.OutputBufferLimit != want {
		t.Fatalf("flag: %+v, %v; want %+v", c.OutputBufferLimit, err, want)
	}
	t.Setenv("CELLD_CLIENT_OUTPUT_BUFFER_LIMIT", "normal 1mb 0 0")
	if c, err = parseFlags(nil); err != nil || c.OutputBufferLimit.Hard != 1<<20 {
		t.Fatalf("env: %+v, %v", c.OutputBufferLimit, err)
	}
	for _, bad := range []string{"normal 1mb", "pubsub 32mb 8mb 60", "normal 1xb 0 0", "normal 0 0 -5"} {
		if _, err := parseFlags([]string{"--client-output-buffer-limit", bad}); err == nil || !strings.Contains(err.Error(), "client-output-buffer-limit") {
			t.Errorf("%q: %v, want an error naming the flag", bad, err)
		}
	}
	t.Setenv("CELLD_CLIENT_OUTPUT_BUFFER_LIMIT", "normal lots 0 0")
	if _, err := parseFlags(nil); err == nil || !strings.Contains(err.Error(), "CELLD_CLIENT_OUTPUT_BUFFER_LIMIT") {
		t.Fatalf("bad env: %v, want an error naming the variable", err)
	}
	if code := run([]string{"--client-output-buffer-limit", "normal 1 2"}); code != 2 {
		t.Fatalf("bad flag: exit %d, want 2", code)
	}
}
