package repl

import (
	"io"
	"net"
	"syscall"
	"unsafe"
)

// rawIO is a TCP connection whose reads and writes are non-blocking
// system calls made with syscall.RawSyscall, waiting for readiness
// through the runtime's network poller (syscall.RawConn) as net.Conn
// does; deadlines and Close from another goroutine work as on the
// connection itself.
//
// Why: an ordinary read or write enters the scheduler's syscall state,
// and the first one after the process went idle wakes the runtime's
// sysmon thread from its deep sleep, which then polls every 20 µs for as
// long as the process stays busy. A follower is busy in short bursts (one
// per batch, every 2 ms): in a P16 profile sysmon's wake-ups were ~17% of
// the follower's CPU. A non-blocking read or write of a socket never
// blocks, so it need not tell the scheduler. Used for a follower's session
// only (one goroutine reads, one writes; rawConn's calls are serialized
// per direction by the runtime's fd locks).
type rawIO struct {
	net.Conn
	rc syscall.RawConn
}

// rawConn returns c with raw reads and writes when it is a TCP
// connection, else c.
func rawConn(c net.Conn) net.Conn {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return c
	}
	return &rawIO{Conn: c, rc: rc}
}

func (r *rawIO) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	var n int
	var errno syscall.Errno
	err := r.rc.Read(func(fd uintptr) bool {
		for {
			r1, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
			if e == syscall.EINTR {
				continue
			}
			n, errno = int(r1), e
			return e != syscall.EAGAIN // false: wait until readable
		}
	})
	switch {
	case err != nil:
		return 0, err
	case errno != 0:
		return 0, errno
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

func (r *rawIO) Write(p []byte) (int, error) {
	done := 0
	for done < len(p) {
		var n int
		var errno syscall.Errno
		err := r.rc.Write(func(fd uintptr) bool {
			for {
				r1, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&p[done])), uintptr(len(p)-done))
				if e == syscall.EINTR {
					continue
				}
				n, errno = int(r1), e
				return e != syscall.EAGAIN // false: wait until writable
			}
		})
		if err != nil {
			return done, err
		}
		if errno != 0 {
			return done, errno
		}
		done += n
	}
	return done, nil
}
