//go:build !amd64

package store

// prefetch is a no-op where celld has no prefetch instruction wired up.
func prefetch(addr uintptr) {}

// prefetchw is a no-op here too.
func prefetchw(addr uintptr) {}
