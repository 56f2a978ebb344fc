package server

import (
	"bufio"
	"bytes"
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Under pipelined load the event loop's epoll_wait returns at once and the
// loop goroutine is never rescheduled; without its yield between turns
// (loopYieldEvery) the runtime's sysmon preempts it with a SIGURG every
// 10 ms of running. The test counts the process's SIGURGs (os/signal sees
// every preemption signal the runtime takes) while clients keep the loop
// busy, with the GC off (its stack scans preempt with SIGURG too), until
// the loop has yielded yieldsWanted times, i.e. run for at least ~0.3 s.
// Without the runtime.Gosched in the loop the count was about one signal
// per 10 ms of the loop's running; with it, a signal comes only when the
// loop's thread was kept off its core for most of 10 ms by the machine.
func TestLoopYieldsBeforeSysmonPreempts(t *testing.T) {
	s, addr := startServer(t, nil)

	const yieldsWanted = 50
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	sigs := make(chan os.Signal, 4096)
	signal.Notify(sigs, syscall.SIGURG)
	defer signal.Stop(sigs)

	var stop atomic.Bool
	var calls atomic.Int64
	var wg sync.WaitGroup
	batch := bytes.Repeat([]byte("*1\r\n$4\r\nPING\r\n"), 64)
	for range 4 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(30 * time.Second))
		wg.Add(1)
		go func() {
			defer wg.Done()
			rd := bufio.NewReaderSize(c, 64<<10)
			want := len("+PONG\r\n") * 64
			for !stop.Load() {
				if _, err := c.Write(batch); err != nil {
					t.Error(err)
					return
				}
				if _, err := rd.Discard(want); err != nil {
					t.Error(err)
					return
				}
				calls.Add(64)
			}
		}()
	}
	y0 := s.loopYields()
	for len(sigs) > 0 {
		<-sigs // before the load
	}
	// Safety bound only: the assertion below is on counts, not time.
	for end := time.Now().Add(20 * time.Second); s.loopYields()-y0 < yieldsWanted && time.Now().Before(end); {
		time.Sleep(5 * time.Millisecond)
	}
	yields := s.loopYields() - y0
	n := len(sigs)
	stop.Store(true)
	wg.Wait()
	t.Logf("%d calls, %d loop yields, %d SIGURG", calls.Load(), yields, n)
	if yields < yieldsWanted {
		t.Fatalf("the loop yielded %d times under load, want >= %d", yields, yieldsWanted)
	}
	if n > yieldsWanted/5 {
		t.Fatalf("%d preemption signals over %d yields (~%d ms of the loop's running): the loop does not yield before sysmon preempts it", n, yields, yields*int64(loopYieldEvery/time.Millisecond))
	}
}
