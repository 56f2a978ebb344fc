package compat_test

import (
	"bufio"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Differential tests: the same commands, on one connection each, to celld
// and to a real redis-server 7 (Debian's package); the replies are compared
// byte for byte, except where a step says how to normalise a reply that
// legitimately differs (a run id, a timestamp).

// needRedisServer finds redis-server the way needRedisCli finds redis-cli:
// CI (CI set, as .ci/run runs, which installs it) fails without it; a
// developer's machine without it skips.
func needRedisServer(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("redis-server not found on PATH: .ci/run installs it; install it (apt-get install -y redis-server)")
		}
		t.Skip("redis-server not installed: apt-get install redis-server to run the differential tests (CI always runs them)")
	}
	return bin
}

// refRedis is a reference redis-server listening on a unix socket in a
// temporary directory (no TCP port, so nothing to race for), stopped by
// t.Cleanup.
type refRedis struct {
	sock string
}

// startRedis starts a reference redis-server with no persistence; extra
// are more "--name value" arguments.
func startRedis(t testing.TB, extra ...string) *refRedis {
	t.Helper()
	bin := needRedisServer(t)
	dir := t.TempDir()
	sock := filepath.Join(dir, "redis.sock")
	args := append([]string{"--port", "0", "--unixsocket", sock, "--save", "", "--appendonly", "no",
		"--dir", dir, "--daemonize", "no", "--loglevel", "warning"}, extra...)
	cmd := exec.Command(bin, args...)
	var logBuf strings.Builder
	cmd.Stdout, cmd.Stderr = &logBuf, &logBuf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	deadline := time.Now().Add(15 * time.Second)
	for {
		if conn, err := net.Dial("unix", sock); err == nil {
			conn.Close()
			return &refRedis{sock: sock}
		}
		select {
		case <-exited:
			t.Fatalf("redis-server exited: %s", logBuf.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server did not start: %s", logBuf.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// dial opens a raw connection to the reference server.
func (r *refRedis) dial(t testing.TB) *rawConn {
	t.Helper()
	conn, err := net.Dial("unix", r.sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &rawConn{t: t, conn: conn, r: bufio.NewReader(conn)}
}

// dstep is one command of a differential transcript. cmd is sent as a RESP
// array (or raw, as written, when raw is set); norm, if set, rewrites both
// replies before they are compared; want, if set, is what both must say
// (after norm) — so a test also shows what Redis answers.
type dstep struct {
	cmd  []string
	raw  string
	norm func(string) string
	want string
	// conn picks the connection in diffMulti (0 = the first); replies is
	// how many replies the command is answered with (0 = 1), e.g. a
	// client-side-caching push before the reply; they are compared joined.
	conn, replies int
}

// d is a dstep from a space-separated command line (no quoting: use
// dstep{cmd: ...} for arguments with spaces).
func d(line string) dstep { return dstep{cmd: strings.Fields(line)} }

// dw is d with the reply both servers must give.
func dw(line, want string) dstep { return dstep{cmd: strings.Fields(line), want: want} }

// diffConns runs steps on a celld connection and a redis-server connection
// in lockstep and fails at the first reply that differs.
func diffConns(t *testing.T, cell, ref *rawConn, steps []dstep) {
	t.Helper()
	for i, st := range steps {
		send := st.raw
		if send == "" {
			send = resp(st.cmd...)
		}
		ref.write(send)
		cell.write(send)
		var want, got string
		for range max(st.replies, 1) {
			want += ref.readReply()
			got += cell.readReply()
		}
		if st.norm != nil {
			want, got = st.norm(want), st.norm(got)
		}
		if got != want {
			t.Fatalf("step %d: %q\n celld: %q\n redis: %q", i, send, got, want)
		}
		if st.want != "" && got != st.want {
			t.Fatalf("step %d: %q: both servers answered %q, the test expects %q", i, send, got, st.want)
		}
	}
}

// diffRun starts a celld (with opts) and a redis-server and runs steps on
// one connection to each.
func diffRun(t *testing.T, steps []dstep, opts ...option) (*testServer, *refRedis) {
	t.Helper()
	ref := startRedis(t)
	ts := startServer(t, opts...)
	diffConns(t, dialRaw(t, ts), ref.dial(t), steps)
	return ts, ref
}

// diffMulti is diffConns over n connections to each server: each step runs
// on its conn, and replies are compared in step order.
func diffMulti(t *testing.T, n int, steps []dstep, opts ...option) {
	t.Helper()
	ref := startRedis(t)
	ts := startServer(t, opts...)
	cells, refs := make([]*rawConn, n), make([]*rawConn, n)
	for i := range n {
		cells[i], refs[i] = dialRaw(t, ts), ref.dial(t)
	}
	for i, st := range steps {
		st := st
		func() {
			t.Helper()
			defer func() {
				if t.Failed() {
					t.Logf("(at step %d, on connection %d)", i, st.conn)
				}
			}()
			diffConns(t, cells[st.conn], refs[st.conn], []dstep{st})
		}()
	}
}
