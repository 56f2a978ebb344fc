// Package etcdtest starts a real, single-member etcd server for tests: the
// Debian `etcd-server` binary (3.4) on free loopback ports, with its data in a
// temporary directory, stopped when the test ends.
//
// Tests that need etcd call Start; it skips the test when the etcd binary is
// absent and CI is unset (a developer's machine without etcd), and fails it
// when CI is set (.ci/run installs etcd-server), the way compat tests treat
// redis-server.
package etcdtest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Etcd is one running etcd member. Its methods may be called from one
// goroutine at a time (the test's).
type Etcd struct {
	bin        string
	dir        string
	clientPort int
	peerPort   int
	mu         sync.Mutex
	cmd        *exec.Cmd
	done       chan struct{}
	log        bytes.Buffer
}

// Bin returns the path of the etcd binary, skipping or failing tb when
// there is none (see the package comment).
func Bin(tb testing.TB) string {
	tb.Helper()
	bin, err := exec.LookPath("etcd")
	if err != nil {
		if os.Getenv("CI") != "" {
			tb.Fatal("etcd not found on PATH: .ci/run installs it; install it (apt-get install -y etcd-server)")
		}
		tb.Skip("etcd not installed: apt-get install etcd-server to run the HA tests (CI always runs them)")
	}
	return bin
}

// Start starts etcd and waits until it answers; tb.Cleanup stops it and
// removes its data.
func Start(tb testing.TB) *Etcd {
	tb.Helper()
	e := &Etcd{bin: Bin(tb), dir: tb.TempDir()}
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		e.clientPort, e.peerPort = freePort(tb), freePort(tb)
		if err = e.start(); err == nil {
			break
		}
	}
	if err != nil {
		tb.Fatalf("etcd: %v\n%s", err, e.Log())
	}
	tb.Cleanup(e.Stop)
	return e
}

// Endpoint is the client URL, http://127.0.0.1:<port>.
func (e *Etcd) Endpoint() string { return "http://127.0.0.1:" + strconv.Itoa(e.clientPort) }

// Endpoints is []string{Endpoint()}.
func (e *Etcd) Endpoints() []string { return []string{e.Endpoint()} }

// Log is what etcd wrote to stdout and stderr so far.
func (e *Etcd) Log() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.log.String()
}

type lockedWriter struct{ e *Etcd }

func (w lockedWriter) Write(p []byte) (int, error) {
	w.e.mu.Lock()
	defer w.e.mu.Unlock()
	if w.e.log.Len() < 1<<20 {
		w.e.log.Write(p)
	}
	return len(p), nil
}

func (e *Etcd) start() error {
	cu := e.Endpoint()
	pu := "http://127.0.0.1:" + strconv.Itoa(e.peerPort)
	cmd := exec.Command(e.bin,
		"--name", "t",
		"--data-dir", filepath.Join(e.dir, "data"),
		"--listen-client-urls", cu, "--advertise-client-urls", cu,
		"--listen-peer-urls", pu, "--initial-advertise-peer-urls", pu,
		"--initial-cluster", "t="+pu,
		"--logger", "zap", "--log-level", "warn",
	)
	cmd.Stdout, cmd.Stderr = lockedWriter{e}, lockedWriter{e}
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	e.cmd, e.done = cmd, done
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		if healthy(ctx, e.clientPort) {
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("etcd exited during start-up")
		case <-ctx.Done():
			e.Stop()
			return fmt.Errorf("etcd did not become healthy in 20 s")
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// healthy asks etcd's /health endpoint.
func healthy(ctx context.Context, port int) bool {
	d := net.Dialer{Timeout: 200 * time.Millisecond}
	c, err := d.DialContext(ctx, "tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		return false
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Second))
	fmt.Fprintf(c, "GET /health HTTP/1.0\r\n\r\n")
	buf := make([]byte, 512)
	n, _ := c.Read(buf)
	for n < len(buf) {
		m, err := c.Read(buf[n:])
		n += m
		if err != nil {
			break
		}
	}
	return bytes.Contains(buf[:n], []byte(`"health":"true"`))
}

// Stop kills etcd (SIGKILL) and waits for it; its data stays until the test
// ends, so Restart brings the same member back.
func (e *Etcd) Stop() {
	if e.cmd == nil {
		return
	}
	e.cmd.Process.Signal(syscall.SIGKILL)
	<-e.done
	e.cmd = nil
}

// Restart starts the stopped member again on the same ports and data.
func (e *Etcd) Restart(tb testing.TB) {
	tb.Helper()
	if err := e.start(); err != nil {
		tb.Fatalf("etcd restart: %v\n%s", err, e.Log())
	}
}

// Pause stops etcd with SIGSTOP (its ports stay bound, requests hang);
// Resume continues it.
func (e *Etcd) Pause()  { e.cmd.Process.Signal(syscall.SIGSTOP) }
func (e *Etcd) Resume() { e.cmd.Process.Signal(syscall.SIGCONT) }

func freePort(tb testing.TB) int {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
