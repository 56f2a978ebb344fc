package server

import (
	"crypto/tls"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// directWriter returns the raw connection of nc for outConn's direct
// writes when nc is a plain TCP or Unix socket (nil for anything that
// transforms the bytes, such as TLS), and the socket's descriptor (found
// under TLS too), or -1.
func directWriter(nc net.Conn) (syscall.RawConn, int) {
	var raw syscall.RawConn
	under := nc
	if tc, ok := nc.(*tls.Conn); ok {
		under = tc.NetConn()
	}
	sc, ok := under.(syscall.Conn)
	if !ok {
		return nil, -1
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil, -1
	}
	fd := -1
	rc.Control(func(f uintptr) { fd = int(f) })
	switch nc.(type) {
	case *net.TCPConn, *net.UnixConn:
		raw = rc
	}
	return raw, fd
}

// writeDirect is RawConn.Write's callback: it writes o.wb from o.wn on
// until the socket is full (EAGAIN, Go's descriptors being non-blocking)
// and always reports done, so that the call never waits.
func (o *outConn) writeDirect(fd uintptr) bool {
	for o.wn < len(o.wb) {
		n, err := rawWrite(int(fd), o.wb[o.wn:])
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return true
		case err != nil:
			o.werr = err
			return true
		}
		o.wn += n
	}
	return true
}
