package sidecar

import (
	"bufio"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/celld/celld/server"
	"github.com/redis/go-redis/v9"
)

// loopConns returns how many upstream connections each event loop of sc
// holds, read on the loops themselves.
func loopConns(t *testing.T, sc *Sidecar) []int {
	t.Helper()
	sc.mu.Lock()
	var loops []*loopState
	for _, ls := range sc.loops {
		loops = append(loops, ls)
	}
	sc.mu.Unlock()
	var out []int
	for _, ls := range loops {
		ch := make(chan int, 1)
		if !ls.l.Post(func() {
			n := 0
			for _, u := range ls.conns {
				if !u.dead {
					n++
				}
			}
			ch <- n
		}) {
			t.Fatal("loop stopped")
		}
		out = append(out, <-ch)
	}
	return out
}

// TestSidecarLoopSharesConnections: 64 clients with pipelines through a
// sidecar with two event loops, on keys of all three owners, are served
// on the loops (no goroutine per client) over at most one upstream
// connection per owner per loop, and each key is decided exactly by its
// owner: 64 × 5 calls on one 10-per-hour key grant exactly 10.
func TestSidecarLoopSharesConnections(t *testing.T) {
	if sidecarIOLoops < 0 {
		t.Skip("loop path only")
	}
	owners := ownerCluster(t, 3)
	side := sidecarNode(t, Config{Seeds: []string{owners[0].addr}})
	var wg sync.WaitGroup
	var mu sync.Mutex
	granted := 0
	errs := make(chan error, 64)
	for c := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nc, err := net.Dial("tcp", side.addr)
			if err != nil {
				errs <- err
				return
			}
			defer nc.Close()
			br := bufio.NewReader(nc)
			for round := range 5 {
				// One pipeline: the shared key, then 20 keys spread
				// over every owner, then a local PING.
				var b []byte
				b = appendStrings(b, "CL.THROTTLE", "shared", "9", "10", "3600")
				for k := range 20 {
					b = appendStrings(b, "CL.THROTTLE", fmt.Sprintf("c%d-r%d-k%d", c, round, k), "0", "1", "60")
				}
				b = appendStrings(b, "PING")
				if _, err := nc.Write(b); err != nil {
					errs <- err
					return
				}
				for i := range 22 {
					line, err := readReply(br)
					if err != nil {
						errs <- err
						return
					}
					switch {
					case i == 0:
						if strings.HasPrefix(line, "*5\r\n:0\r\n") {
							mu.Lock()
							granted++
							mu.Unlock()
						}
					case i == 21:
						if line != "+PONG\r\n" {
							errs <- fmt.Errorf("reply %d: %q, want PONG", i, line)
							return
						}
					default:
						if !strings.HasPrefix(line, "*5\r\n:0\r\n:1\r\n:0\r\n") {
							errs <- fmt.Errorf("client %d reply %d: %q", c, i, line)
							return
						}
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if granted != 10 {
		t.Fatalf("granted %d of 320 calls on a 10-per-hour key, want 10", granted)
	}
	conns := loopConns(t, side.sc)
	if len(conns) == 0 {
		t.Fatal("no event loop forwarded anything")
	}
	for i, n := range conns {
		if n > 3 {
			t.Fatalf("loop %d holds %d upstream connections, want at most one per owner (3)", i, n)
		}
	}
	if got := side.sc.StatsRef().Forwarded.Load(); got != 64*5*21 {
		t.Fatalf("forwarded %d, want %d", got, 64*5*21)
	}
	total := 0
	for _, o := range owners {
		total += o.st.Len()
	}
	if total != 64*5*20+1 {
		t.Fatalf("owners hold %d keys, want %d", total, 64*5*20+1)
	}
}

// readReply reads one whole RESP reply (as raw text).
func readReply(br *bufio.Reader) (string, error) {
	var sb strings.Builder
	var read func() error
	read = func() error {
		line, err := br.ReadString('\n')
		if err != nil {
			return err
		}
		sb.WriteString(line)
		switch line[0] {
		case '*':
			n, _ := strconv.Atoi(strings.TrimSpace(line[1:]))
			for range max(n, 0) {
				if err := read(); err != nil {
					return err
				}
			}
		case '$':
			n, _ := strconv.Atoi(strings.TrimSpace(line[1:]))
			if n >= 0 {
				b := make([]byte, n+2)
				if _, err := ioReadFull(br, b); err != nil {
					return err
				}
				sb.Write(b)
			}
		}
		return nil
	}
	err := read()
	return sb.String(), err
}

func ioReadFull(br *bufio.Reader, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		k, err := br.Read(b[n:])
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// TestSidecarLoopLargePipeline: 20,000 commands written at once (many
// reads, many parked runs of 32 per connection, writes larger than a
// socket buffer upstream) come back complete and in order, and a client
// that keeps writing while its commands are upstream (a parked
// connection that turns readable) is served too.
func TestSidecarLoopLargePipeline(t *testing.T) {
	owners := ownerCluster(t, 3)
	side := sidecarNode(t, Config{Seeds: []string{owners[2].addr}})
	nc, err := net.Dial("tcp", side.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	const n = 20000
	go func() {
		// Written in pieces while replies flow back.
		var b []byte
		for i := range n {
			if i%7 == 0 {
				b = appendStrings(b, "ECHO", "e"+strconv.Itoa(i))
			} else {
				b = appendStrings(b, "SET", "key"+strconv.Itoa(i), "v"+strconv.Itoa(i))
			}
			if len(b) > 3000 {
				nc.Write(b)
				b = b[:0]
			}
		}
		nc.Write(b)
		b = b[:0]
		for i := range n {
			b = appendStrings(b, "GET", "key"+strconv.Itoa(i))
		}
		nc.Write(b)
	}()
	br := bufio.NewReader(nc)
	for i := range n {
		r, err := readReply(br)
		if err != nil {
			t.Fatal(err)
		}
		want := "+OK\r\n"
		if i%7 == 0 {
			want = fmt.Sprintf("$%d\r\ne%d\r\n", len(strconv.Itoa(i))+1, i)
		}
		if r != want {
			t.Fatalf("reply %d: %q, want %q", i, r, want)
		}
	}
	for i := range n {
		r, err := readReply(br)
		if err != nil {
			t.Fatal(err)
		}
		want := "$-1\r\n"
		if i%7 != 0 {
			v := "v" + strconv.Itoa(i)
			want = fmt.Sprintf("$%d\r\n%s\r\n", len(v), v)
		}
		if r != want {
			t.Fatalf("GET reply %d: %q, want %q", i, r, want)
		}
	}
	if side.st.Len() != 0 {
		t.Fatalf("sidecar keyspace holds %d keys, want 0", side.st.Len())
	}
}

// TestSidecarLoopNotBlocked: while one client's command waits on a silent
// owner, the loop serves other clients (a PING on the same sidecar is
// answered before that command's timeout ends it); a client that hangs
// up while parked is dropped, and the sidecar goes on.
func TestSidecarLoopNotBlocked(t *testing.T) {
	if sidecarIOLoops < 0 {
		t.Skip("loop path only")
	}
	owner := silentOwner(t)
	side := sidecarNode(t, Config{Seeds: []string{owner}, Fallback: Closed, Timeout: 5 * time.Second})
	// A client that hangs up while parked.
	gone, err := net.Dial("tcp", side.addr)
	if err != nil {
		t.Fatal(err)
	}
	gone.Write(appendStrings(nil, "GET", "a"))
	waiting := redis.NewClient(&redis.Options{Addr: side.addr, MaxRetries: -1, ReadTimeout: 20 * time.Second})
	t.Cleanup(func() { waiting.Close() })
	done := make(chan error, 1)
	go func() { done <- waiting.Get(ctx, "k").Err() }()
	time.Sleep(50 * time.Millisecond) // let it park (not an assertion)
	gone.Close()
	pinger := client(t, side.addr)
	for range 20 {
		if err := pinger.Ping(ctx).Err(); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case err := <-done:
		t.Fatalf("the forwarded GET ended before the PINGs: %v", err)
	default:
	}
	if err := <-done; err == nil || !strings.HasPrefix(err.Error(), "UPSTREAMDOWN") {
		t.Fatalf("GET on a silent owner, fallback closed: %v", err)
	}
	if err := pinger.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
}

var _ server.AsyncForwarder = (*Sidecar)(nil)

// TestSidecarLoopOwnerLostMidPipeline: one owner of three goes away while
// pipelines over all of them run: every reply still comes, in order; the
// lost owner's keys are decided by the local fallback, the others' by
// their owners.
func TestSidecarLoopOwnerLostMidPipeline(t *testing.T) {
	owners := ownerCluster(t, 3)
	side := sidecarNode(t, Config{Seeds: []string{owners[0].addr}, Timeout: 2 * time.Second})
	rdb := client(t, side.addr)
	run := func(round int) {
		pipe := rdb.Pipeline()
		var cmds []*redis.Cmd
		for i := range 300 {
			cmds = append(cmds, pipe.Do(ctx, "CL.THROTTLE", fmt.Sprintf("r%d-k%d", round, i), 0, 1, 60))
		}
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		for i, c := range cmds {
			if r := cmdInts(t, c); r[0] != 0 || r[1] != 1 || r[2] != 0 {
				t.Fatalf("round %d, command %d: %v", round, i, r)
			}
		}
	}
	run(0)
	go owners[1].stop(t)
	for round := 1; round <= 5; round++ {
		run(round)
	}
	st := side.sc.StatsRef()
	if st.FallbackByMode[Local].Load() == 0 || side.st.Len() == 0 {
		t.Fatalf("no local decision with owner 1 gone (fallbacks %d, local keys %d)", st.FallbackByMode[Local].Load(), side.st.Len())
	}
	if got := int(st.Forwarded.Load()) + int(st.FallbackByMode[Local].Load()); got != 6*300 {
		t.Fatalf("forwarded + fallback = %d, want %d", got, 6*300)
	}
	if owners[0].st.Len() == 0 || owners[2].st.Len() == 0 {
		t.Fatal("the owners still up decided nothing")
	}
}

// TestSidecarLoopResumeKeepsBatch: a batch parked mid-way is run on at its
// resume without being parsed again: inline commands (encoded for the
// owner) and RESP arrays (sent as the client wrote them) in forwarded
// runs between local commands, several parks in one batch, get their
// replies in order; a protocol error after them is answered after them,
// and the connection closed.
func TestSidecarLoopResumeKeepsBatch(t *testing.T) {
	owners := ownerCluster(t, 3)
	side := sidecarNode(t, Config{Seeds: []string{owners[1].addr}})
	nc, err := net.Dial("tcp", side.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	var b []byte
	var want []string
	for i := range 3 {
		k := "rk" + strconv.Itoa(i)
		b = append(b, "SET "+k+" inline"+strconv.Itoa(i)+"\r\n"...)
		b = appendStrings(b, "GET", k)
		b = append(b, "PING\r\n"...)
		b = appendStrings(b, "APPEND", k, "+resp")
		b = append(b, "GET "+k+"\r\n"...)
		b = appendStrings(b, "ECHO", "e"+strconv.Itoa(i))
		v := "inline" + strconv.Itoa(i)
		want = append(want, "+OK\r\n", fmt.Sprintf("$%d\r\n%s\r\n", len(v), v), "+PONG\r\n",
			fmt.Sprintf(":%d\r\n", len(v)+5), fmt.Sprintf("$%d\r\n%s+resp\r\n", len(v)+5, v),
			fmt.Sprintf("$2\r\ne%d\r\n", i))
	}
	b = append(b, "*1\r\n$x\r\n"...) // a protocol error
	if _, err := nc.Write(b); err != nil {
		t.Fatal(err)
	}
	nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(nc)
	for i, w := range want {
		r, err := readReply(br)
		if err != nil {
			t.Fatalf("reply %d: %v", i, err)
		}
		if r != w {
			t.Fatalf("reply %d: %q, want %q", i, r, w)
		}
	}
	r, err := readReply(br)
	if err != nil || !strings.HasPrefix(r, "-ERR Protocol error") {
		t.Fatalf("after the batch: %q, %v; want a protocol error", r, err)
	}
	if _, err := br.ReadByte(); err == nil {
		t.Fatal("connection still open after the protocol error")
	}
	if side.st.Len() != 0 {
		t.Fatalf("sidecar keyspace holds %d keys, want 0", side.st.Len())
	}
}
