package main

import (
	"debug/elf"
	"os"

	"golang.org/x/sys/unix"
)

// releaseTextPages drops celld's own read-only pages (its code and
// read-only data: the ELF segments it maps without write permission) from
// the process's resident set and from the page cache, so that RSS counts
// the pages celld uses rather than the whole binary.
//
// Why: the binary's code and read-only data are 27 MB (the etcd client,
// pebble, gRPC), and a kernel that caches files in large folios (ext4 on
// Linux 6.x) maps a whole folio, up to 2 MB, on the first touch of any of
// its pages (smaps: FilePmdMapped 18 MB), so every page of the binary was
// resident: an idle celld had 33 MB of RSS, 27 MB of it its file pages,
// and under a key spray at the same bound celld had redis-server's
// anonymous memory (74.0 vs 73.6 MB) but 101.7 vs 82.9 MB of RSS.
// MADV_NOHUGEPAGE and MADV_RANDOM make later faults map and read single
// pages (no 2 MB mappings, no read-ahead), and MADV_PAGEOUT reclaims the
// large folios start-up touched (only those no other process maps; the
// contents never change: the pages are re-read from the file when used).
// Measured: the binary's resident pages 27 MB -> 3-5 MB (idle, and after
// 200k SET/GET), idle RSS 33 -> 13 MB.
//
// Only segments without write permission are advised, shrunk to whole
// pages no writable segment shares, so that no written (copy-on-write)
// page of the data segments is paged out. A position-independent binary
// (its segments' addresses are not the headers') is left alone. Called
// once, by main, after the restore; an error leaves RSS as it was. Cost:
// under a millisecond (plus writing a freshly built binary back), then a page read (4 KB) the first time each code
// page is used again: the hot paths pay it in the first few requests.
func releaseTextPages() (released int, err error) {
	exe, err := os.Executable()
	if err != nil {
		return 0, err
	}
	fd, err := os.Open(exe)
	if err != nil {
		return 0, err
	}
	defer fd.Close()
	f, err := elf.NewFile(fd)
	if err != nil {
		return 0, err
	}
	if f.Type != elf.ET_EXEC {
		return 0, nil
	}
	// A binary written moments ago (a fresh build, as the process tests
	// run) still has dirty pages in the page cache, which MADV_PAGEOUT
	// cannot drop: write them back first (nothing to do for an installed
	// binary).
	if err := fd.Sync(); err != nil {
		return 0, err
	}
	page := uint64(os.Getpagesize())
	for _, r := range readOnlyRanges(f.Progs, page) {
		for _, advice := range []int{unix.MADV_NOHUGEPAGE, unix.MADV_RANDOM, unix.MADV_PAGEOUT} {
			// The raw call: the range is not a Go object.
			if _, _, e := unix.Syscall(unix.SYS_MADVISE, uintptr(r[0]), uintptr(r[1]-r[0]), uintptr(advice)); e != 0 {
				return released, e
			}
		}
		released += int(r[1] - r[0])
	}
	return released, nil
}

// readOnlyRanges is the [start, end) address ranges of the loadable
// segments without write permission, in whole pages of size page, less
// every page a writable segment (or the part made read-only after
// relocation, PT_GNU_RELRO) has a byte in.
func readOnlyRanges(progs []*elf.Prog, page uint64) [][2]uint64 {
	var writable, out [][2]uint64
	for _, p := range progs {
		if p.Type == elf.PT_LOAD && p.Flags&elf.PF_W != 0 || p.Type == elf.PT_GNU_RELRO {
			writable = append(writable, [2]uint64{p.Vaddr &^ (page - 1), (p.Vaddr + p.Memsz + page - 1) &^ (page - 1)})
		}
	}
	for _, p := range progs {
		if p.Type != elf.PT_LOAD || p.Flags&elf.PF_W != 0 {
			continue
		}
		start, end := p.Vaddr&^(page-1), (p.Vaddr+p.Memsz+page-1)&^(page-1)
		for _, w := range writable {
			if w[0] < end && start < w[1] { // overlap: cut it away
				if w[0] <= start {
					start = min(w[1], end)
				} else {
					end = w[0]
				}
			}
		}
		if start < end {
			out = append(out, [2]uint64{start, end})
		}
	}
	return out
}
