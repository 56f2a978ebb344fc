package persist

// prefetch asks the CPU to start loading the cache line holding addr. It
// never faults and has no effect on memory (as store's).
//
//go:noescape
func prefetch(addr uintptr)
