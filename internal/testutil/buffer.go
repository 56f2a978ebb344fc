// Package testutil holds helpers that several packages' tests share.
// Nothing in celld itself imports it.
package testutil

import (
	"bytes"
	"sync"
)

// Buffer is a bytes.Buffer that is safe for concurrent use: a server's
// logger, or a fake connection, writes to it while the test reads it. The
// zero value is an empty buffer.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
