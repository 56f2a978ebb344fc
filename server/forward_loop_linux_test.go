package server

import (
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// fdLogger is an FdHandler that reads what its socket holds, logs its
// name and, when it has one, pokes the next socket (writes a byte to the
// peer of a socket the same loop watches).
type fdLogger struct {
	name string
	fd   int
	poke int // -1: none
	log  *[]string
}

func (h *fdLogger) FdEvent(readable, writable bool) {
	var b [16]byte
	unix.Read(h.fd, b[:])
	*h.log = append(*h.log, h.name)
	if h.poke >= 0 {
		unix.Write(h.poke, []byte{1})
	}
}

// An event that becomes ready while a loop serves a wake (an owner's reply,
// a client's next pipeline) is handled before the forwarder's after-events
// hook writes upstream: one write carries what both events queued. Here
// socket A's handler makes socket B readable; B's event must come before
// the hook runs, not in a wake (and a write) of its own.
func TestLoopGathersEventsBeforeAfterHooks(t *testing.T) {
	s, _ := startServerConfig(t, nil, Config{})
	l, err := newEventLoop(s)
	if err != nil {
		t.Fatal(err)
	}
	go l.run()
	defer l.shutdown()
	pair := func() [2]int {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Close(fds[0]); unix.Close(fds[1]) })
		return fds
	}
	a, b := pair(), pair()
	var log []string // the loop goroutine's
	done := make(chan string, 1)
	hb := &fdLogger{name: "B", fd: b[0], poke: -1, log: &log}
	ha := &fdLogger{name: "A", fd: a[0], poke: b[1], log: &log}
	watched := make(chan error, 1)
	l.Post(func() {
		l.AfterEvents(func() {
			if len(log) == 0 || log[len(log)-1] == "flush" {
				return
			}
			log = append(log, "flush")
			if log[len(log)-2] == "B" {
				done <- strings.Join(log, " ")
			}
		})
		err := l.Watch(a[0], ha)
		if err == nil {
			err = l.Watch(b[0], hb)
		}
		watched <- err
	})
	if err := <-watched; err != nil {
		t.Fatal(err)
	}
	if _, err := unix.Write(a[1], []byte{1}); err != nil {
		t.Fatal(err)
	}
	if got, want := <-done, "A B flush"; got != want {
		t.Fatalf("events and hooks ran as %q, want %q (B's event gathered before the hook)", got, want)
	}
	l.Post(func() { l.Unwatch(a[0]); l.Unwatch(b[0]) })
}
