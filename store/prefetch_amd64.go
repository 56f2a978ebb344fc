package store

// prefetch asks the CPU to start loading the cache line holding addr. It
// never faults and has no effect on memory; see Store.Prefetch.
//
//go:noescape
func prefetch(addr uintptr)
