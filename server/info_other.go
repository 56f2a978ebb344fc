//go:build !linux

package server

import "runtime"

// Host facts for INFO where /proc and Linux syscalls are not available.

func osName() string        { return runtime.GOOS + " " + runtime.GOARCH }
func residentBytes() uint64 { return 0 }
func systemMemory() uint64  { return 0 }
func infoCPU() []string {
	return []string{"used_cpu_sys:0.000000", "used_cpu_user:0.000000",
		"used_cpu_sys_children:0.000000", "used_cpu_user_children:0.000000"}
}
