package store

// prefetch asks the CPU to start loading the cache line holding addr. It
// never faults and has no effect on memory; see Store.Prefetch.
//
//go:noescape
func prefetch(addr uintptr)

// prefetchw is prefetch for a line about to be written: the CPU fetches it
// exclusive, so the write that follows does not have to take it away from
// another core's cache then (the flusher's drain reads the entries the
// event loop writes).
//
//go:noescape
func prefetchw(addr uintptr)
