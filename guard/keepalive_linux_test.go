package guard

import (
	"net"
	"syscall"
	"testing"
	"time"
)

// Accepted connections get Redis's tcp-keepalive: idle 300 s, probes every
// 100 s, 3 of them.
func TestListenerKeepAlive(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := NewListener(raw, Limits{})
	defer ln.Close()
	client, err := net.Dial("tcp", raw.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	nc, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if ln.Clients() != 1 {
		t.Fatalf("Clients() = %d", ln.Clients())
	}
	sc, err := nc.(*Conn).NetConn().(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	want := map[int]int{
		syscall.SO_KEEPALIVE:  1,
		syscall.TCP_KEEPIDLE:  int(DefaultKeepAlive / time.Second),
		syscall.TCP_KEEPINTVL: int(DefaultKeepAlive / 3 / time.Second),
		syscall.TCP_KEEPCNT:   3,
	}
	sc.Control(func(fd uintptr) {
		for opt, v := range want {
			level := syscall.IPPROTO_TCP
			if opt == syscall.SO_KEEPALIVE {
				level = syscall.SOL_SOCKET
			}
			got, err := syscall.GetsockoptInt(int(fd), level, opt)
			if err != nil || got != v {
				t.Errorf("option %d = %d, %v; want %d", opt, got, err, v)
			}
		}
	})
	nc.Close()
	nc.Close()
	if ln.Clients() != 0 {
		t.Fatalf("Clients() = %d after Close", ln.Clients())
	}
}
