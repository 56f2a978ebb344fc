//go:build !unix

package server

func processCPUNs() int64 { return 0 }
