package main

import (
	"bufio"
	"debug/elf"
	"os"
	"strconv"
	"strings"
	"testing"
)

// exeResident is the resident bytes of pid's mappings of the file path
// (from /proc/PID/smaps).
func exeResident(t *testing.T, pid int, path string) int64 {
	t.Helper()
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/smaps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var n int64
	ours := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		switch {
		case len(fields) >= 5 && strings.Contains(fields[0], "-") && !strings.HasSuffix(fields[0], ":"):
			ours = len(fields) >= 6 && fields[5] == path
		case ours && len(fields) == 3 && fields[0] == "Rss:":
			kb, _ := strconv.ParseInt(fields[1], 10, 64)
			n += kb << 10
		}
	}
	return n
}

// TestProcessTextPagesReleased: a started celld keeps only the binary's
// pages it uses resident (releaseTextPages), not its whole code and
// read-only data, which a kernel caching files in large folios maps
// entirely (27 MB of RSS before).
func TestProcessTextPagesReleased(t *testing.T) {
	bin := celldBinary(t)
	ef, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	var ro uint64
	for _, r := range readOnlyRanges(ef.Progs, uint64(os.Getpagesize())) {
		ro += r[1] - r[0]
	}
	ef.Close()
	c := mustLaunch(t, t.TempDir(), "--persist=false")
	rdb := c.client()
	for i := range 1000 { // use the hot paths
		if err := rdb.Do(t.Context(), "CL.THROTTLE", "k"+strconv.Itoa(i), 10, 100, 60, 1).Err(); err != nil {
			t.Fatal(err)
		}
	}
	res := exeResident(t, c.cmd.Process.Pid, bin)
	t.Logf("binary's resident pages: %.1f MB of %.1f MB read-only", float64(res)/(1<<20), float64(ro)/(1<<20))
	if uint64(res) > ro/3 {
		t.Errorf("%d bytes of the binary resident, over a third of its %d read-only bytes", res, ro)
	}
	c.termOK()
}

// TestReadOnlyRanges: the advised ranges are the read-only segments in
// whole pages, less any page a writable segment or RELRO touches.
func TestReadOnlyRanges(t *testing.T) {
	const page = 0x1000
	progs := []*elf.Prog{
		{ProgHeader: elf.ProgHeader{Type: elf.PT_LOAD, Flags: elf.PF_R, Vaddr: 0x400000, Memsz: 0x1728}},
		{ProgHeader: elf.ProgHeader{Type: elf.PT_LOAD, Flags: elf.PF_R | elf.PF_X, Vaddr: 0x402000, Memsz: 0xca9b39}},
		{ProgHeader: elf.ProgHeader{Type: elf.PT_LOAD, Flags: elf.PF_R, Vaddr: 0x10ac000, Memsz: 0x10900}},
		{ProgHeader: elf.ProgHeader{Type: elf.PT_LOAD, Flags: elf.PF_R | elf.PF_W, Vaddr: 0x10bc800, Memsz: 0x800}},
		{ProgHeader: elf.ProgHeader{Type: elf.PT_GNU_RELRO, Flags: elf.PF_R, Vaddr: 0x10bc800, Memsz: 0x4d0}},
	}
	got := readOnlyRanges(progs, page)
	want := [][2]uint64{{0x400000, 0x402000}, {0x402000, 0x10ac000}, {0x10ac000, 0x10bc000}}
	if len(got) != len(want) {
		t.Fatalf("ranges %x, want %x", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("ranges %x, want %x", got, want)
		}
	}
}
