//go:build unix

package main

import "syscall"

// processCPUNs is the test process's user+system CPU time in ns: benchmarks
// report it per op beside ns/op, since on a shared machine wall time
// counts the neighbours' load too.
func processCPUNs() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
