package compat_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any goroutine outlives the tests: every
// server started by a test has been shut down by then (t.Cleanup), so a
// goroutine left behind is a connection, accept loop or background worker
// the server failed to stop, or a client a test failed to close.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
