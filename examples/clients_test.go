// Package examples runs the client examples of docs/clients.md against a
// real celld server: Python (redis-py) runs; Node (ioredis) is checked for
// syntax only, as Debian does not package ioredis and CI does not reach npm.
// The Go example is the ratelimit package beside this file (examples/go).
package examples

import (
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/celld/celld/server"
	"github.com/celld/celld/store"
)

func startCelld(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, store.New(store.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		<-done
	})
	return ln.Addr().String()
}

// missing fails the test in CI (.ci/run installs what it needs) and skips
// it on a developer's machine that lacks the tool.
func missing(t *testing.T, what, install string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("%s not found: .ci/run installs %s", what, install)
	}
	t.Skipf("%s not found (install %s; CI always runs this)", what, install)
}

// TestPythonExample runs examples/python/throttle.py with redis-py. It
// asserts its own results and exits non-zero on a mismatch.
func TestPythonExample(t *testing.T) {
	var python string
	for _, p := range []string{"python3", "/usr/bin/python3"} {
		if exec.Command(p, "-c", "import redis").Run() == nil {
			python = p
			break
		}
	}
	if python == "" {
		missing(t, "python3 with redis-py", "python3-redis")
	}
	cmd := exec.Command(python, "python/throttle.py")
	cmd.Env = append(os.Environ(), "CELLD_ADDR="+startCelld(t))
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "python example: ok") {
		t.Fatalf("python/throttle.py: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}

// TestNodeExample checks examples/node/throttle.js's syntax with node.
func TestNodeExample(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		missing(t, "node", "nodejs")
	}
	if out, err := exec.Command(node, "--check", "node/throttle.js").CombinedOutput(); err != nil {
		t.Fatalf("node --check node/throttle.js: %v\n%s", err, out)
	}
}
