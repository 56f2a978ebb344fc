//go:build !unix

package store

func processCPUNs() int64 { return 0 }
