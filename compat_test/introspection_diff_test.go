package compat_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/celld/celld/server"
)

// Differential tests of the introspection numbers (issue 14 item 8, issue
// 16 item 11): celld and a real redis-server get the same commands, and
// the fields are compared where the two are comparable: names, order and
// format of CLIENT LIST / CLIENT INFO, idle after a sleep, argv-mem and
// multi-mem, byte counters, expired_keys, avg_ttl, CONFIG GET
// client-output-buffer-limit.

// startRedisServerForDiff starts a redis-server on a free loopback port
// with persistence off (and the extra args, as on its command line) and
// returns its address; it is killed when the test
// ends. CI (CI set, as .ci/run runs) installs redis-server, so there a
// missing binary fails the test; elsewhere the test is skipped.
func startRedisServerForDiff(t *testing.T, args ...string) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("redis-server not found on PATH: .ci/run installs it (apt-get install -y redis-server)")
		}
		t.Skip("redis-server not installed: apt-get install redis-server to run this differential test (CI always runs it)")
	}
	for attempt := 0; ; attempt++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		cmd := exec.Command(bin, append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--save", "", "--appendonly", "no", "--daemonize", "no", "--dir", t.TempDir()}, args...)...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { cmd.Wait(); close(exited) }()
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			select {
			case <-exited:
				if attempt < 3 { // the port was taken meanwhile: another
					goto retry
				}
				t.Fatal("redis-server exited at start-up")
			default:
			}
			if c, err := net.Dial("tcp", addr); err == nil {
				c.Close()
				t.Cleanup(func() { cmd.Process.Kill(); <-exited })
				return addr
			}
			time.Sleep(20 * time.Millisecond)
		}
		cmd.Process.Kill()
		t.Fatal("redis-server did not listen within 10 s")
	retry:
	}
}

// diffConn is a RESP2 client over a plain connection.
type diffConn struct {
	t    *testing.T
	c    net.Conn
	r    *bufio.Reader
	name string // "celld" or "redis", for messages
}

func dialDiff(t *testing.T, name, addr string) *diffConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &diffConn{t: t, c: c, r: bufio.NewReader(c), name: name}
}

// do sends one command and returns its reply: a string for simple, bulk
// and error replies (errors prefixed "-"), an int64, nil, or []any.
func (d *diffConn) do(args ...string) any {
	d.t.Helper()
	d.c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(d.c, resp(args...)); err != nil {
		d.t.Fatalf("%s: write: %v", d.name, err)
	}
	v, err := d.reply()
	if err != nil {
		d.t.Fatalf("%s: %v: %v", d.name, args, err)
	}
	return v
}

func (d *diffConn) str(args ...string) string {
	d.t.Helper()
	s, ok := d.do(args...).(string)
	if !ok {
		d.t.Fatalf("%s: %v: not a string reply", d.name, args)
	}
	return s
}

func (d *diffConn) reply() (any, error) {
	line, err := d.r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return nil, fmt.Errorf("empty line")
	}
	switch line[0] {
	case '+':
		return line[1:], nil
	case '-':
		return line, nil
	case ':':
		return strconv.ParseInt(line[1:], 10, 64)
	case '$':
		n, _ := strconv.Atoi(line[1:])
		if n < 0 {
			return nil, nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(d.r, buf); err != nil {
			return nil, err
		}
		return string(buf[:n]), nil
	case '*':
		n, _ := strconv.Atoi(line[1:])
		if n < 0 {
			return nil, nil
		}
		out := make([]any, n)
		for i := range out {
			if out[i], err = d.reply(); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("unexpected reply line %q", line)
}

// infoInt reads one numeric INFO field.
func (d *diffConn) infoInt(section, field string) int64 {
	d.t.Helper()
	for _, l := range strings.Split(d.str("INFO", section), "\r\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && k == field {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				d.t.Fatalf("%s: INFO %s: %q", d.name, field, v)
			}
			return n
		}
	}
	d.t.Fatalf("%s: INFO %s has no %s", d.name, section, field)
	return 0
}

// clientFields splits a CLIENT LIST / CLIENT INFO line into its field
// names, in order, and values.
func clientFields(line string) ([]string, map[string]string) {
	var names []string
	vals := map[string]string{}
	for _, f := range strings.Fields(line) {
		k, v, _ := strings.Cut(f, "=")
		names = append(names, k)
		vals[k] = v
	}
	return names, vals
}

// clientLine returns the CLIENT LIST line of the client with the given id.
func (d *diffConn) clientLine(id int64) map[string]string {
	d.t.Helper()
	for _, l := range strings.Split(d.str("CLIENT", "LIST"), "\n") {
		if _, vals := clientFields(l); vals["id"] == strconv.FormatInt(id, 10) {
			return vals
		}
	}
	d.t.Fatalf("%s: CLIENT LIST has no client %d", d.name, id)
	return nil
}

func (d *diffConn) id() int64 {
	d.t.Helper()
	n, ok := d.do("CLIENT", "ID").(int64)
	if !ok {
		d.t.Fatalf("%s: CLIENT ID", d.name)
	}
	return n
}

// bothServers starts a celld and a redis-server and returns their
// addresses, celld first.
func bothServers(t *testing.T) (celld, redis string) {
	t.Helper()
	redis = startRedisServerForDiff(t)
	return startServer(t).Addr, redis
}

// CLIENT LIST and CLIENT INFO: the same fields in the same order as Redis
// 7.0 (celld adds Redis 7.2's lib-name and lib-ver at the end), every
// numeric field a number, and the values that mean the same on both equal:
// argv-mem of the asking client's own command, multi-mem of a queued
// transaction, qbuf/obl/oll/omem of an idle client, events.
func TestDiffClientListFields(t *testing.T) {
	celldAddr, redisAddr := bothServers(t)
	numeric := []string{"id", "fd", "age", "idle", "db", "sub", "psub", "ssub", "multi", "qbuf", "qbuf-free",
		"argv-mem", "multi-mem", "rbs", "rbp", "obl", "oll", "omem", "tot-mem", "redir", "resp"}
	type view struct {
		info, other map[string]string
		names       []string
	}
	views := map[string]view{}
	for _, srv := range []struct{ name, addr string }{{"celld", celldAddr}, {"redis", redisAddr}} {
		a := dialDiff(t, srv.name, srv.addr)
		b := dialDiff(t, srv.name, srv.addr)
		names, info := clientFields(a.str("CLIENT", "INFO"))
		for _, f := range numeric {
			if _, err := strconv.ParseInt(info[f], 10, 64); err != nil {
				t.Errorf("%s: CLIENT INFO %s=%q is not a number", srv.name, f, info[f])
			}
		}
		if fd, _ := strconv.Atoi(info["fd"]); fd <= 0 {
			t.Errorf("%s: fd=%d", srv.name, fd)
		}
		if mem, _ := strconv.Atoi(info["tot-mem"]); mem <= 0 {
			t.Errorf("%s: tot-mem=%d", srv.name, mem)
		}
		// b queues a transaction; a describes b.
		if got := b.str("MULTI"); got != "OK" {
			t.Fatalf("%s: MULTI: %q", srv.name, got)
		}
		if got := b.str("SET", "diff:k", "1"); got != "QUEUED" {
			t.Fatalf("%s: SET in MULTI: %q", srv.name, got)
		}
		other := a.clientLine(b.id2(t, a))
		views[srv.name] = view{info: info, other: other, names: names}
		if got := b.do("DISCARD"); got != "OK" {
			t.Fatalf("%s: DISCARD: %v", srv.name, got)
		}
		if b.clientFd(a) == info["fd"] {
			t.Errorf("%s: two connections share fd %s", srv.name, info["fd"])
		}
	}
	c, r := views["celld"], views["redis"]
	names := c.names
	if n := len(names); n >= 2 && names[n-2] == "lib-name" && names[n-1] == "lib-ver" {
		names = names[:n-2]
	}
	if strings.Join(names, " ") != strings.Join(r.names, " ") {
		t.Errorf("CLIENT INFO fields\ncelld: %v\nredis: %v", c.names, r.names)
	}
	for _, f := range []string{"argv-mem", "multi", "obl", "oll", "omem", "events", "cmd", "flags", "db", "resp"} {
		if c.info[f] != r.info[f] {
			t.Errorf("CLIENT INFO %s: celld %q, redis %q", f, c.info[f], r.info[f])
		}
	}
	for _, f := range []string{"multi", "multi-mem", "argv-mem", "qbuf", "obl", "oll", "omem", "events", "flags", "cmd"} {
		if c.other[f] != r.other[f] {
			t.Errorf("CLIENT LIST, a client inside MULTI, %s: celld %q, redis %q", f, c.other[f], r.other[f])
		}
	}
}

// id2 returns d's client id as other's CLIENT LIST shows it, found by d's
// address, so that d itself sends nothing (it may be inside MULTI).
func (d *diffConn) id2(t *testing.T, other *diffConn) int64 {
	t.Helper()
	local := d.c.LocalAddr().String()
	for _, l := range strings.Split(other.str("CLIENT", "LIST"), "\n") {
		if _, vals := clientFields(l); vals["addr"] == local {
			n, _ := strconv.ParseInt(vals["id"], 10, 64)
			return n
		}
	}
	t.Fatalf("%s: no client at %s", d.name, local)
	return 0
}

// clientFd returns d's fd as other's CLIENT LIST shows it.
func (d *diffConn) clientFd(other *diffConn) string {
	return other.clientLine(d.id2(d.t, other))["fd"]
}

// idle counts whole seconds since a client's last command, on both.
func TestDiffClientIdle(t *testing.T) {
	celldAddr, redisAddr := bothServers(t)
	type pair struct{ a, b *diffConn }
	var pairs []pair
	for _, srv := range []struct{ name, addr string }{{"celld", celldAddr}, {"redis", redisAddr}} {
		p := pair{dialDiff(t, srv.name, srv.addr), dialDiff(t, srv.name, srv.addr)}
		if got := p.a.str("PING"); got != "PONG" {
			t.Fatalf("%s: PING: %q", srv.name, got)
		}
		pairs = append(pairs, p)
	}
	time.Sleep(2500 * time.Millisecond)
	for _, p := range pairs {
		line := p.b.clientLine(p.a.id2(t, p.b))
		idle, _ := strconv.Atoi(line["idle"])
		if idle < 2 || idle > 3 {
			t.Errorf("%s: idle=%d after 2.5 s without a command, want 2 or 3", p.a.name, idle)
		}
		if self := p.b.clientLine(p.b.id2(t, p.a)); self["idle"] != "0" {
			t.Errorf("%s: the asking client's idle=%s, want 0", p.b.name, self["idle"])
		}
	}
}

// total_net_input_bytes grows by exactly the bytes sent (the same on both
// servers), total_net_output_bytes by at least the replies read.
func TestDiffNetBytes(t *testing.T) {
	celldAddr, redisAddr := bothServers(t)
	inDelta := map[string]int64{}
	for _, srv := range []struct{ name, addr string }{{"celld", celldAddr}, {"redis", redisAddr}} {
		d := dialDiff(t, srv.name, srv.addr)
		in0 := d.infoInt("stats", "total_net_input_bytes")
		out0 := d.infoInt("stats", "total_net_output_bytes")
		const n = 200
		var replies int
		for i := range n {
			v := d.str("ECHO", strings.Repeat("x", 100+i))
			replies += len(fmt.Sprintf("$%d\r\n%s\r\n", len(v), v))
		}
		in1 := d.infoInt("stats", "total_net_input_bytes")
		out1 := d.infoInt("stats", "total_net_output_bytes")
		inDelta[srv.name] = in1 - in0
		if out1-out0 < int64(replies) {
			t.Errorf("%s: total_net_output_bytes grew by %d over %d bytes of replies", srv.name, out1-out0, replies)
		}
	}
	if inDelta["celld"] != inDelta["redis"] || inDelta["celld"] <= 0 {
		t.Errorf("total_net_input_bytes grew by %d on celld, %d on redis, for the same bytes sent", inDelta["celld"], inDelta["redis"])
	}
}

// expired_keys counts keys removed because their TTL passed, on access and
// by the background cycle, as Redis does; avg_ttl is the mean remaining
// TTL of the keys with one; CONFIG GET client-output-buffer-limit is
// Redis's default.
func TestDiffExpiredKeysAvgTTLAndConfig(t *testing.T) {
	celldAddr, redisAddr := bothServers(t)
	conns := []*diffConn{dialDiff(t, "celld", celldAddr), dialDiff(t, "redis", redisAddr)}
	base := map[string]int64{}
	for _, d := range conns {
		base[d.name] = d.infoInt("stats", "expired_keys")
		d.str("SET", "exp:lazy", "1", "PX", "50")
		for i := range 10 {
			d.str("SET", "exp:active:"+strconv.Itoa(i), "1", "PX", "50")
		}
		d.str("SET", "exp:deleted", "1", "PX", "50")
		if got := d.do("DEL", "exp:deleted"); got != int64(1) {
			t.Fatalf("%s: DEL: %v", d.name, got)
		}
	}
	time.Sleep(100 * time.Millisecond)
	for _, d := range conns {
		if got := d.do("GET", "exp:lazy"); got != nil {
			t.Fatalf("%s: GET of an expired key: %v", d.name, got)
		}
	}
	// The background cycles remove the other ten, without access.
	deadline := time.Now().Add(10 * time.Second)
	for _, d := range conns {
		for d.infoInt("stats", "expired_keys")-base[d.name] < 11 && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if got := d.infoInt("stats", "expired_keys") - base[d.name]; got != 11 {
			t.Errorf("%s: expired_keys grew by %d, want 11 (1 on access, 10 by the cycle; the DEL is not an expiry)", d.name, got)
		}
	}

	avg := map[string]int64{}
	for _, d := range conns {
		d.str("SET", "ttl:a", "1", "PX", "100000")
		d.str("SET", "ttl:b", "1", "PX", "200000")
		d.str("SET", "ttl:c", "1", "PX", "300000")
		d.str("SET", "ttl:none", "1")
	}
	for _, d := range conns {
		for time.Now().Before(deadline) {
			line := d.str("INFO", "keyspace")
			_, v, _ := strings.Cut(line, "avg_ttl=")
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.Split(v, ",")[0]), 10, 64)
			if avg[d.name] = n; n > 0 { // Redis's first estimate comes with its next expiry cycle
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	for name, n := range avg {
		if n < 190_000 || n > 200_000 {
			t.Errorf("%s: avg_ttl=%d for TTLs of 100, 200 and 300 s set just now, want about 200000", name, n)
		}
	}
	if d := avg["celld"] - avg["redis"]; d < -5000 || d > 5000 {
		t.Errorf("avg_ttl: celld %d, redis %d", avg["celld"], avg["redis"])
	}
	var cfg []string
	for _, d := range conns {
		v, ok := d.do("CONFIG", "GET", "client-output-buffer-limit").([]any)
		if !ok || len(v) != 2 {
			t.Fatalf("%s: CONFIG GET client-output-buffer-limit: %v", d.name, v)
		}
		cfg = append(cfg, fmt.Sprint(v))
	}
	if cfg[0] != cfg[1] {
		t.Errorf("CONFIG GET client-output-buffer-limit: celld %s, redis %s", cfg[0], cfg[1])
	}
}

// With client-output-buffer-limit "normal 1mb 0 0" on both, a client that
// pipelines 16 MiB of replies and reads nothing is disconnected by both
// before it gets them all; the same batch under the limit is answered in
// full by both; CONFIG GET shows the limit the same way.
func TestDiffOutputBufferHardLimit(t *testing.T) {
	redisAddr := startRedisServerForDiff(t, "--client-output-buffer-limit", "normal 1mb 0 0")
	celldAddr := startServer(t, quietLog(), withConfig(func(c *server.Config) {
		c.OutputBufferLimit = server.OutputBufferLimit{Hard: 1 << 20}
	})).Addr
	big := strings.Repeat("v", 256<<10)
	var pipe []byte
	for range 64 {
		pipe = append(pipe, resp("ECHO", big)...)
	}
	var cfg []string
	for _, srv := range []struct{ name, addr string }{{"celld", celldAddr}, {"redis", redisAddr}} {
		d := dialDiff(t, srv.name, srv.addr)
		v, _ := d.do("CONFIG", "GET", "client-output-buffer-limit").([]any)
		cfg = append(cfg, fmt.Sprint(v))

		c, err := net.Dial("tcp", srv.addr)
		if err != nil {
			t.Fatal(err)
		}
		// A small receive buffer, so that the sockets cannot hold all
		// 16 MiB of replies.
		c.(*net.TCPConn).SetReadBuffer(64 << 10)
		// Send everything before reading: the write ends when the
		// server has read it all (it answered every command) or has
		// closed the connection (the limit).
		c.SetWriteDeadline(time.Now().Add(30 * time.Second))
		wrote := make(chan struct{})
		go func() { c.Write(pipe); close(wrote) }()
		<-wrote
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		n, err := io.Copy(io.Discard, c)
		c.Close()
		if n >= int64(len(pipe)) {
			t.Errorf("%s: read %d bytes of replies, all of them, past a 1 MiB limit", srv.name, n)
		}
		if err != nil && !strings.Contains(err.Error(), "reset") {
			t.Errorf("%s: %v after %d bytes, want EOF or a reset", srv.name, err, n)
		}
		// Under the limit: 4 replies of 256 KiB read as they come.
		for i := range 4 {
			if got := d.str("ECHO", big); len(got) != len(big) {
				t.Fatalf("%s: ECHO %d under the limit: %d bytes", srv.name, i, len(got))
			}
		}
	}
	if cfg[0] != cfg[1] {
		t.Errorf("CONFIG GET client-output-buffer-limit: celld %s, redis %s", cfg[0], cfg[1])
	}
}
