package testutil

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// RedisCellModuleEnv names the environment variable that points the tests
// at a built redis-cell module (libredis_cell.so). The module is not part
// of this repository and is not built by it (docs/redis-cell-parity.md
// says how it was built by hand); tests that need it skip without it.
const RedisCellModuleEnv = "CELLD_REDIS_CELL_MODULE"

// RedisCellModule returns the path of the redis-cell module, or skips tb
// when CELLD_REDIS_CELL_MODULE is unset. A path that is set but missing
// fails tb: someone asked for the module and it is not there.
func RedisCellModule(tb testing.TB) string {
	tb.Helper()
	p := os.Getenv(RedisCellModuleEnv)
	if p == "" {
		tb.Skipf("%s is not set: these tests need a built redis-cell module (see docs/redis-cell-parity.md)", RedisCellModuleEnv)
	}
	if _, err := os.Stat(p); err != nil {
		tb.Fatalf("%s=%s: %v", RedisCellModuleEnv, p, err)
	}
	return p
}

// fakeClockLib compiles testdata/fakeclock.c (an LD_PRELOAD shim that
// freezes the wall clock) into dir and returns the library's path, or
// skips tb when no C compiler is installed.
func fakeClockLib(tb testing.TB, dir string) string {
	tb.Helper()
	cc, err := exec.LookPath("cc")
	if err != nil {
		tb.Skip("no C compiler (cc) to build the fake-clock shim (apt-get install gcc)")
	}
	_, self, _, _ := runtime.Caller(0)
	src := filepath.Join(filepath.Dir(self), "testdata", "fakeclock.c")
	lib := filepath.Join(dir, "fakeclock.so")
	if out, err := exec.Command(cc, "-shared", "-fPIC", "-O2", "-o", lib, src).CombinedOutput(); err != nil {
		tb.Fatalf("building %s: %v\n%s", src, err, out)
	}
	return lib
}

// RedisCell is a redis-server with the redis-cell module loaded, on a TCP
// port of 127.0.0.1, stopped by tb.Cleanup (or Stop). With a fake clock,
// its wall clock (the one redis-cell reads, and the one Redis expires keys
// by) is frozen at the time SetClock last wrote (testdata/fakeclock.c,
// preloaded), so that
// the module decides at exactly the nanosecond a test chooses. One
// goroutine at a time may call its methods.
type RedisCell struct {
	Addr      string
	cmd       *exec.Cmd
	exited    chan struct{}
	clockFile string
	log       *strings.Builder
}

// StartRedisCell starts a redis-server with the module; fakeClockNs > 0
// freezes its wall clock at that time (ns since the Unix epoch), which
// needs a C compiler for the shim (the test skips without one). Skips without redis-server
// or the module.
func StartRedisCell(tb testing.TB, fakeClockNs int64) *RedisCell {
	tb.Helper()
	mod := RedisCellModule(tb)
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		tb.Skip("redis-server not installed (apt-get install redis-server)")
	}
	dir := tb.TempDir()
	r := &RedisCell{exited: make(chan struct{}), log: &strings.Builder{}}
	env := os.Environ()
	if fakeClockNs > 0 {
		lib := fakeClockLib(tb, dir)
		r.clockFile = filepath.Join(dir, "clock")
		if err := r.writeClock(fakeClockNs); err != nil {
			tb.Fatal(err)
		}
		// Only the wall clock is frozen; monotonic time stays real, so
		// Redis's event loop and timers keep working.
		env = append(env, "LD_PRELOAD="+lib, "CELLD_FAKECLOCK_FILE="+r.clockFile)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	r.Addr = ln.Addr().String()
	ln.Close()
	_, port, _ := net.SplitHostPort(r.Addr)
	r.cmd = exec.Command(bin, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", dir, "--daemonize", "no", "--loglevel", "warning", "--loadmodule", mod)
	r.cmd.Env = env
	r.cmd.Stdout, r.cmd.Stderr = r.log, r.log
	if err := r.cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	go func() { r.cmd.Wait(); close(r.exited) }()
	tb.Cleanup(r.Stop)
	deadline := time.Now().Add(15 * time.Second)
	for {
		if c, err := net.Dial("tcp", r.Addr); err == nil {
			c.Close()
			return r
		}
		select {
		case <-r.exited:
			tb.Fatalf("redis-server with redis-cell exited: %s", r.log.String())
		default:
		}
		if time.Now().After(deadline) {
			tb.Fatalf("redis-server with redis-cell did not start: %s", r.log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Exited reports whether the server process has ended (a module abort
// ends it).
func (r *RedisCell) Exited() bool {
	select {
	case <-r.exited:
		return true
	default:
		return false
	}
}

// Log is what the server printed.
func (r *RedisCell) Log() string { return r.log.String() }

// Stop kills the server and waits for it.
func (r *RedisCell) Stop() {
	r.cmd.Process.Kill()
	<-r.exited
}

// SetClock moves the frozen wall clock to ns since the Unix epoch (only
// with a fake clock); the server reads it on its next clock call.
func (r *RedisCell) SetClock(tb testing.TB, ns int64) {
	tb.Helper()
	if r.clockFile == "" {
		tb.Fatal("SetClock on a RedisCell started without a fake clock")
	}
	if err := r.writeClock(ns); err != nil {
		tb.Fatal(err)
	}
}

func (r *RedisCell) writeClock(ns int64) error {
	// The shim maps the file and reads its first 8 bytes on every clock
	// call: rewrite them in place (one aligned 8-byte write).
	f, err := os.OpenFile(r.clockFile, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(ns))
	_, err = f.WriteAt(b[:], 0)
	return err
}

// Conn is a plain RESP connection for tests that compare replies byte for
// byte.
type Conn struct {
	tb testing.TB
	c  net.Conn
	r  *bufio.Reader
}

// Dial opens a connection to the server at addr, closed by tb.Cleanup.
func Dial(tb testing.TB, addr string) *Conn {
	tb.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	return &Conn{tb: tb, c: c, r: bufio.NewReader(c)}
}

// Do sends args as a RESP array and returns the whole reply as the bytes
// the server sent.
func (c *Conn) Do(args ...string) string {
	c.tb.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	c.c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.c.Write([]byte(b.String())); err != nil {
		c.tb.Fatalf("write %q: %v", args, err)
	}
	s, err := ReadReply(c.r)
	if err != nil {
		c.tb.Fatalf("reply to %q: %v", args, err)
	}
	return s
}

// ReadReply reads one RESP2/RESP3 reply and returns its bytes.
func ReadReply(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return line, err
	}
	if len(line) < 3 {
		return line, fmt.Errorf("bad reply line %q", line)
	}
	n := func() (int, error) { return strconv.Atoi(strings.TrimSuffix(line[1:], "\r\n")) }
	var b strings.Builder
	b.WriteString(line)
	switch line[0] {
	case '$', '=', '!':
		k, err := n()
		if err != nil || k < 0 {
			return line, err
		}
		buf := make([]byte, k+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return line, err
		}
		b.Write(buf)
	case '*', '~', '>', '%', '|':
		k, err := n()
		if err != nil {
			return line, err
		}
		if line[0] == '%' || line[0] == '|' {
			k *= 2
		}
		for ; k > 0; k-- {
			s, err := ReadReply(r)
			b.WriteString(s)
			if err != nil {
				return b.String(), err
			}
		}
	}
	return b.String(), nil
}
