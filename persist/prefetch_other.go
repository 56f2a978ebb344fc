//go:build !amd64

package persist

// prefetch is a no-op where celld has no prefetch instruction wired up.
func prefetch(addr uintptr) {}
