//go:build !linux

package server

import (
	"net"
	"syscall"
)

// directWriter: without the raw write, every outConn Write queues for its
// writer goroutine.
func directWriter(net.Conn) (syscall.RawConn, int) { return nil, -1 }

func (o *outConn) writeDirect(uintptr) bool { return true }
