package guard

import (
	"syscall"
	"testing"
)

// nbConn is a non-blocking connection: each Read returns the next entry of
// script, a nil entry (or the end of the script) as syscall.EAGAIN.
type nbConn struct {
	fakeConn
	script [][]byte
}

func (c *nbConn) Read(p []byte) (int, error) {
	if len(c.script) == 0 {
		return 0, syscall.EAGAIN
	}
	b := c.script[0]
	c.script = c.script[1:]
	if b == nil {
		return 0, syscall.EAGAIN
	}
	return copy(p, b), nil
}

// On a non-blocking connection Read says EAGAIN when it has nothing, says
// it beside the bytes of a command that is not whole yet (nothing to parse),
// never returns a stale EAGAIN once data is there, and ReadReady tells an
// event loop when input is held or the stream has ended.
func TestNonBlockingReads(t *testing.T) {
	ping := "*1\r\n$4\r\nPING\r\n"
	type read struct {
		n     int
		again bool
	}
	for _, tc := range []struct {
		name   string
		script []string // "" = EAGAIN
		want   []read
	}{
		{"nothing", []string{""}, []read{{0, true}}},
		{"whole command", []string{ping, ""}, []read{{len(ping), false}, {0, true}}},
		// "$4" is a header line not ended yet: the guard holds it.
		{"part of one", []string{ping[:6], "", ping[6:], ""}, []read{{4, true}, {len(ping) - 4, false}, {0, true}}},
		// Bulk bytes pass as they come: a partial command with EAGAIN.
		{"part of a bulk", []string{ping[:10], "", ping[10:], ""}, []read{{10, true}, {len(ping) - 10, false}, {0, true}}},
		// "*1\r" is held too, so there is nothing to hand over.
		{"whole and part", []string{ping + ping[:3], ""}, []read{{len(ping), false}, {0, true}, {0, true}}},
		{"data after EAGAIN", []string{"", ping, "", ping}, []read{{0, true}, {len(ping), false}, {0, true}, {len(ping), false}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc := &nbConn{}
			for _, s := range tc.script {
				if s == "" {
					nc.script = append(nc.script, nil)
				} else {
					nc.script = append(nc.script, []byte(s))
				}
			}
			c := NewConn(nc, Limits{})
			buf := make([]byte, 4096)
			for i, w := range tc.want {
				n, err := c.Read(buf)
				if n != w.n || (err == syscall.EAGAIN) != w.again || (err != nil && err != syscall.EAGAIN) {
					t.Fatalf("read %d: %d, %v; want %d, EAGAIN %v", i, n, err, w.n, w.again)
				}
			}
		})
	}
	// Before AUTH commands are handed over one at a time: the rest is held,
	// and ReadReady says so until it has been read.
	nc := &nbConn{script: [][]byte{[]byte(ping + ping), nil}}
	c := NewConn(nc, Limits{}, RequireAuth(true))
	buf := make([]byte, 4096)
	if n, err := c.Read(buf); n != len(ping) || err != nil || !c.ReadReady() {
		t.Fatalf("first: %d, %v, ready %v", n, err, c.ReadReady())
	}
	if n, err := c.Read(buf); n != len(ping) || err != nil || c.ReadReady() {
		t.Fatalf("second: %d, %v, ready %v", n, err, c.ReadReady())
	}
	// Authenticated, a read that ends inside a command keeps that part
	// for the next Read, but it is no reason to read before the socket
	// has more: ReadReady is false.
	nc = &nbConn{script: [][]byte{[]byte(ping + ping[:10]), nil, []byte(ping[10:]), nil}}
	c = NewConn(nc, Limits{})
	if n, err := c.Read(buf); n != len(ping) || err != nil || c.ReadReady() {
		t.Fatalf("whole and part: %d, %v, ready %v", n, err, c.ReadReady())
	}
	if n, err := c.Read(buf); n != 10 || err != syscall.EAGAIN {
		t.Fatalf("the held part: %d, %v", n, err)
	}
	if n, err := c.Read(buf); n != len(ping)-10 || err != nil {
		t.Fatalf("the rest: %d, %v", n, err)
	}
	// A command then a violation in one read: the command comes first,
	// and ReadReady says the error is waiting, without more input.
	nc = &nbConn{script: [][]byte{[]byte(ping + "*99999999\r\n"), nil}}
	c = NewConn(nc, Limits{})
	if n, err := c.Read(buf); n != len(ping) || err != nil || !c.ReadReady() {
		t.Fatalf("before the violation: %d, %v, ready %v", n, err, c.ReadReady())
	}
	if _, err := c.Read(buf); err == nil || err == syscall.EAGAIN {
		t.Fatalf("violation: %v", err)
	}
}
