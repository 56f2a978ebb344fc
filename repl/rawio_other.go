//go:build !linux

package repl

import "net"

// rawConn is c: raw system calls are used on Linux only (rawio_linux.go).
func rawConn(c net.Conn) net.Conn { return c }
