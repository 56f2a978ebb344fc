package guard

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"github.com/celld/celld/internal/testutil"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"testing"
	"time"
)

// Every Read returns whole commands, or part of one command, never whole
// commands followed by the start of the next: redcon's Reader grows its
// buffer whenever a read fills it and ends inside a command, without
// compacting what it has parsed, so mixing the two lets a pipeline grow that
// buffer without bound.
func TestReadEndsAtCommandBoundary(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var in []byte
	var ends []int // offsets just after each command
	for len(in) < 1<<20 {
		if rng.IntN(4) == 0 {
			in = append(in, "ECHO "+strings.Repeat("i", rng.IntN(200))+"\r\n"...)
		} else {
			n := 1 + rng.IntN(3000)
			in = fmt.Appendf(in, "*2\r\n$4\r\nECHO\r\n$%d\r\n%s\r\n", n, strings.Repeat("m", n))
		}
		ends = append(ends, len(in))
	}
	isEnd := make(map[int]bool, len(ends))
	for _, e := range ends {
		isEnd[e] = true
	}
	for _, authed := range []bool{true, false} {
		for _, readSize := range []int{64, 100, 4096, 65536} {
			c := NewConn(&fakeConn{chunks: randomChunks(in, rng)}, Limits{}, RequireAuth(!authed))
			p := make([]byte, readSize)
			var out []byte
			for {
				n, err := c.Read(p)
				if n > 0 {
					start, end := len(out), len(out)+n
					out = append(out, p[:n]...)
					if !isEnd[end] {
						for o := start + 1; o < end; o++ {
							if isEnd[o] {
								t.Fatalf("authed=%v reads of %d: Read returned [%d, %d): a command ends at %d and the next is cut at %d",
									authed, readSize, start, end, o, end)
							}
						}
					}
				}
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			if !bytes.Equal(out, in) {
				t.Fatalf("authed=%v reads of %d: the stream changed (%d bytes in, %d out)", authed, readSize, len(in), len(out))
			}
		}
	}
}

// randomChunks cuts in as a socket might, from 1 byte to 10 KB.
func randomChunks(in []byte, rng *rand.Rand) [][]byte {
	var out [][]byte
	for len(in) > 0 {
		n := 1 + rng.IntN(min(len(in), 10000))
		out = append(out, bytes.Clone(in[:n]))
		in = in[n:]
	}
	return out
}

// An ignored "*0" between commands is dropped, and the commands around it
// still come out whole.
func TestReadBoundaryAroundIgnoredCounts(t *testing.T) {
	in := "PING\r\n*0\r\n*1\r\n$4\r\nPING\r\n*-1\r\n*0\r\n*1\r\n$4\r\nPI"
	want := "PING\r\n*1\r\n$4\r\nPING\r\n*1\r\n$4\r\nPI"
	for _, sp := range splitters {
		for _, readSize := range []int{64, 4096} {
			res := feed(sp.fn([]byte(in)), Limits{}, true, readSize)
			if string(res.out) != want || res.err != io.EOF {
				t.Errorf("%s, reads of %d: %q %v; want %q", sp.name, readSize, res.out, res.err, want)
			}
		}
	}
}

// With MaxQueryBuffer left at zero it follows MaxBulk, so a command carrying
// one argument of MaxBulk bytes fits (its headers and CRLFs come on top).
func TestDefaultQueryBufferFollowsMaxBulk(t *testing.T) {
	for _, maxBulk := range []int64{1000, DefaultMaxBulk, 4 << 20} {
		lim := Limits{MaxBulk: maxBulk}
		if err := lim.Validate(); err != nil {
			t.Fatal(err)
		}
		eff := lim.withDefaults()
		if eff.MaxQueryBuffer < 2*maxBulk || eff.MaxQueryBuffer < DefaultMaxQueryBuffer {
			t.Errorf("MaxBulk %d: MaxQueryBuffer %d", maxBulk, eff.MaxQueryBuffer)
		}
		cmd := fmt.Sprintf("*2\r\n$4\r\nECHO\r\n$%d\r\n%s\r\n", maxBulk, strings.Repeat("x", int(maxBulk)))
		res := feed(whole([]byte(cmd)), lim, true, 4096)
		if string(res.out) != cmd || res.err != io.EOF {
			t.Errorf("MaxBulk %d: a bulk of MaxBulk bytes was refused: %v", maxBulk, res.err)
		}
	}
	if DefaultLimits().MaxQueryBuffer != 1<<20 {
		t.Errorf("DefaultMaxQueryBuffer = %d", DefaultLimits().MaxQueryBuffer)
	}
}

// Listeners given one Clients share MaxClients.
func TestShareClients(t *testing.T) {
	var shared Clients
	var lns []*Listener
	var addrs []string
	for range 2 {
		raw, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ln := NewListener(raw, Limits{}, MaxClients(2), ShareClients(&shared))
		defer ln.Close()
		lns = append(lns, ln)
		addrs = append(addrs, raw.Addr().String())
	}
	accept := func(ln *Listener) chan net.Conn {
		ch := make(chan net.Conn, 1)
		go func() {
			c, err := ln.Accept()
			if err == nil {
				ch <- c
			}
			close(ch)
		}()
		return ch
	}
	var clients []net.Conn
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	for i := range 2 {
		ch := accept(lns[i])
		c, err := net.Dial("tcp", addrs[i])
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, c)
		sc := <-ch
		defer sc.Close()
	}
	if shared.Open() != 2 || lns[0].Clients() != 2 || lns[1].Clients() != 2 {
		t.Fatalf("Open() = %d, Clients() = %d, %d", shared.Open(), lns[0].Clients(), lns[1].Clients())
	}
	// A third connection on the first listener is over the shared limit.
	ch := accept(lns[0])
	c, err := net.Dial("tcp", addrs[0])
	if err != nil {
		t.Fatal(err)
	}
	clients = append(clients, c)
	c.SetDeadline(time.Now().Add(10 * time.Second))
	got, _ := io.ReadAll(c)
	if string(got) != maxClientsReply || shared.Rejected() != 1 {
		t.Fatalf("third client got %q; Rejected() = %d", got, shared.Rejected())
	}
	lns[0].Close()
	<-ch
}

// Over MaxClients, a TLS connection needs a handshake before it can be
// answered; a client that never sends its ClientHello must not hold up
// Accept.
func TestRejectTLSDoesNotBlockAccept(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cert := testutil.SelfSigned(t)
	ln := NewListener(tls.NewListener(raw, &tls.Config{Certificates: []tls.Certificate{cert}}), Limits{}, MaxClients(1))
	defer ln.Close()
	accepted := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	first, err := net.Dial("tcp", raw.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	held := <-accepted
	silent, err := net.Dial("tcp", raw.Addr().String()) // over the limit, and mute
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	for ln.Rejected() != 1 {
		time.Sleep(time.Millisecond)
	}
	held.Close() // frees the slot
	next, err := net.Dial("tcp", raw.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close()
	select {
	case c := <-accepted:
		c.Close()
	case <-time.After(3 * time.Second):
		t.Fatal("Accept is stuck answering the silent TLS client over MaxClients")
	}
}
