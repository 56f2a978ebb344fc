package server

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Host facts for INFO on Linux.

// osName is uname's "sysname release machine", as Redis prints it.
func osName() string {
	var u syscall.Utsname
	if err := syscall.Uname(&u); err != nil {
		return "Linux"
	}
	return cstr(u.Sysname[:]) + " " + cstr(u.Release[:]) + " " + cstr(u.Machine[:])
}

// cstr converts a NUL-terminated utsname field (int8 or uint8 by platform).
func cstr[T int8 | uint8](f []T) string {
	b := make([]byte, 0, len(f))
	for _, ch := range f {
		if ch == 0 {
			break
		}
		b = append(b, byte(ch))
	}
	return string(b)
}

// residentBytes is the process's RSS from /proc/self/statm, 0 if unknown.
func residentBytes() uint64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		return 0
	}
	return pages * uint64(os.Getpagesize())
}

// systemMemory is the host's total RAM, 0 if unknown.
func systemMemory() uint64 {
	var si syscall.Sysinfo_t
	if err := syscall.Sysinfo(&si); err != nil {
		return 0
	}
	return uint64(si.Totalram) * uint64(si.Unit)
}

// infoCPU is INFO's CPU section from getrusage.
func infoCPU() []string {
	sec := func(tv syscall.Timeval) string {
		d := time.Duration(tv.Nano())
		return strconv.FormatFloat(d.Seconds(), 'f', 6, 64)
	}
	var self, children syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children)
	return []string{
		"used_cpu_sys:" + sec(self.Stime),
		"used_cpu_user:" + sec(self.Utime),
		"used_cpu_sys_children:" + sec(children.Stime),
		"used_cpu_user_children:" + sec(children.Utime),
	}
}
