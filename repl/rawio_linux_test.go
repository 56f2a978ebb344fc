package repl

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// TestRawConnIO: rawConn's reads and writes carry a stream larger than the
// socket buffers (so writes meet EAGAIN and wait for the poller), honour a
// read deadline, end with io.EOF when the peer closes, and a Close from
// another goroutine ends a read waiting for data.
func TestRawConnIO(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	dialed, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	a := rawConn(dialed)
	if _, ok := a.(*rawIO); !ok {
		t.Fatalf("rawConn of a TCP connection is %T, want *rawIO", a)
	}
	srv, ok := <-accepted
	if !ok {
		t.Fatal("accept failed")
	}
	b := rawConn(srv)

	want := make([]byte, 8<<20)
	for i := range want {
		want[i] = byte(i*7 + i>>11)
	}
	errc := make(chan error, 1)
	go func() {
		for off := 0; off < len(want); off += 1 << 20 { // 1 MiB writes: more than a socket buffer
			if n, err := a.Write(want[off : off+1<<20]); err != nil || n != 1<<20 {
				errc <- err
				return
			}
		}
		errc <- nil
	}()
	got := make([]byte, len(want))
	if _, err := io.ReadFull(bufio.NewReaderSize(b, 4096), got); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal("write:", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("the bytes read differ from the bytes written")
	}

	b.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	if _, err := b.Read(got[:1]); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past its deadline: %v, want a deadline error", err)
	}
	b.SetReadDeadline(time.Time{})

	a.Close()
	if n, err := b.Read(got[:1]); n != 0 || err != io.EOF {
		t.Fatalf("read after the peer closed: %d, %v; want 0, EOF", n, err)
	}

	// A read waiting for data ends when its own connection is closed.
	done := make(chan error, 1)
	c2, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	r := rawConn(c2)
	go func() {
		_, err := r.Read(got[:1])
		done <- err
	}()
	time.Sleep(10 * time.Millisecond)
	r.Close()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("read on a closed connection returned no error")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not end a waiting read")
	}
	b.Close()
}
