package compat_test

import (
	"context"
	"errors"
	"io"
	"net"
	"reflect"
	"sync"
	"testing"
	"time"

	redigo "github.com/gomodule/redigo/redis"
)

// probeConn is the server's side of a connection, instrumented so the test
// can order events with channels instead of sleeps:
//   - readAll closes once the server has read the whole pipeline;
//   - the server's next Write (the replies to the last commands read) waits
//     for proceed, so those replies are still in flight when Shutdown starts;
//   - deadline closes when Shutdown sets the read deadline that ends the
//     connection.
//
// read is touched only by the connection's own goroutine (Read and Write).
type probeConn struct {
	net.Conn
	total    int
	read     int
	readAll  chan struct{}
	proceed  chan struct{}
	deadline chan struct{}
	once     [2]sync.Once
}

func (p *probeConn) Read(b []byte) (int, error) {
	n, err := p.Conn.Read(b)
	p.read += n
	if p.read >= p.total {
		p.once[0].Do(func() { close(p.readAll) })
	}
	return n, err
}

func (p *probeConn) Write(b []byte) (int, error) {
	if p.read >= p.total {
		<-p.proceed
	}
	return p.Conn.Write(b)
}

func (p *probeConn) SetReadDeadline(t time.Time) error {
	p.once[1].Do(func() { close(p.deadline) })
	return p.Conn.SetReadDeadline(t)
}

func TestShutdownDrainsInFlightPipeline(t *testing.T) {
	const n = 1000
	probe := &probeConn{
		total:    n * len(resp("CL.THROTTLE", "pipe", "499", "1", "1")),
		readAll:  make(chan struct{}),
		proceed:  make(chan struct{}),
		deadline: make(chan struct{}),
	}
	accepted := 0
	ts := startServer(t, withFakeClock(t0), withConnWrapper(func(c net.Conn) net.Conn {
		accepted++ // only the accept goroutine runs this
		if accepted == 1 {
			probe.Conn = c
			return probe
		}
		return c
	}))
	conn := newRedigo(t, ts)
	for i := 0; i < n; i++ {
		if err := conn.Send("CL.THROTTLE", "pipe", 499, 1, 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := conn.Flush(); err != nil {
		t.Fatal(err)
	}

	<-probe.readAll // every command is read; the last replies are held back
	shutdown := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		shutdown <- ts.Srv.Shutdown(ctx)
	}()
	<-probe.deadline // Shutdown has begun draining this connection
	close(probe.proceed)
	if err := <-shutdown; err != nil {
		t.Fatalf("Shutdown = %v, want nil", err)
	}

	// Every reply arrived, in order, exactly.
	for i := 0; i < n; i++ {
		got, err := redigo.Values(conn.Receive())
		if want := pipeWant(int64(i + 1)); err != nil || !reflect.DeepEqual(norm(got), want) {
			t.Fatalf("reply %d: %s %v, want %s", i+1, show(norm(got)), err, show(want))
		}
	}
	// Then the server closed the connection.
	if _, err := conn.Receive(); err == nil {
		t.Error("connection still open after Shutdown")
	}
	// And no longer accepts.
	if c, err := net.Dial("tcp", ts.Addr); err == nil {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) && !isNetError(err) {
			t.Errorf("new connection after Shutdown: read error %v, want EOF or reset", err)
		}
		c.Close()
	}
}

// isNetError reports a socket-level failure (connection reset or refused).
func isNetError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op)
}

// TestShutdownIdleClients: idle connections (and one mid-transaction) are
// closed and Shutdown returns nil.
func TestShutdownIdleClients(t *testing.T) {
	ts := startServer(t, withFakeClock(t0))
	a, b := dialRaw(t, ts), dialRaw(t, ts)
	runRaw(t, a, []rawStep{{resp("CL.THROTTLE", "k", "0", "1", "60"), "*5\r\n:0\r\n:1\r\n:0\r\n:-1\r\n:60\r\n"}})
	b.write(resp("MULTI"))
	if got := b.readLine(); got != "+OK\r\n" {
		t.Fatalf("MULTI = %q", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ts.Srv.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown = %v", err)
	}
	for _, rc := range []*rawConn{a, b} {
		rc.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := rc.r.ReadByte(); err == nil {
			t.Error("read a byte from a connection Shutdown should have closed")
		}
	}
	// A second Shutdown is a no-op.
	if err := ts.Srv.Shutdown(ctx); err != nil {
		t.Errorf("second Shutdown = %v", err)
	}
}
