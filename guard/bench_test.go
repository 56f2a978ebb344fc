package guard

import (
	"strings"
	"testing"
)

// Streams for the benchmarks, each repeated to about 64 KiB so that reads cut
// frames at varying places (exercising the header hold).
var benchStreams = []struct{ name, unit string }{
	{"throttle", "*5\r\n$11\r\nCL.THROTTLE\r\n$9\r\nuser:1234\r\n$2\r\n15\r\n$2\r\n30\r\n$2\r\n60\r\n"},
	{"mthrottle3", "*16\r\n$12\r\nCL.MTHROTTLE\r\n" + strings.Repeat("$14\r\na:000000012345\r\n$7\r\n1000000\r\n$1\r\n1\r\n$2\r\n60\r\n$1\r\n1\r\n", 3)},
	{"set-64KiB", "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$65536\r\n" + strings.Repeat("v", 65536) + "\r\n"},
	{"inline", "CL.THROTTLE user:1234 15 30 60\r\n"},
}

func repeatTo(unit string, size int) []byte {
	return []byte(strings.Repeat(unit, max(1, size/len(unit))))
}

// BenchmarkRead measures Conn.Read on a connection that delivers the stream
// over and over, with bufio's 4 KiB reads (what redcon asks for) and with
// 64 KiB reads. One op is one pass over the stream; MB/s is guarded
// throughput. "raw" reads the same stream without the guard.
func BenchmarkRead(b *testing.B) {
	for _, s := range benchStreams {
		data := repeatTo(s.unit, 64<<10)
		for _, size := range []int{4096, 64 << 10} {
			for _, guarded := range []bool{true, false} {
				name := s.name + "/" + map[int]string{4096: "4KiB", 64 << 10: "64KiB"}[size]
				if !guarded {
					name += "/raw"
				}
				b.Run(name, func(b *testing.B) {
					lc := &loopConn{data: data}
					read := lc.Read
					if guarded {
						read = NewConn(lc, Limits{}).Read
					}
					p := make([]byte, size)
					b.SetBytes(int64(len(data)))
					b.ReportAllocs()
					for b.Loop() {
						for total := 0; total < len(data); {
							n, err := read(p)
							if err != nil {
								b.Fatal(err)
							}
							total += n
						}
					}
				})
			}
		}
	}
}

// BenchmarkReadParallel runs one guarded connection per goroutine, as a
// server does.
func BenchmarkReadParallel(b *testing.B) {
	data := repeatTo(benchStreams[0].unit, 64<<10)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		c := NewConn(&loopConn{data: data}, Limits{})
		p := make([]byte, 4096)
		for pb.Next() {
			for total := 0; total < len(data); {
				n, err := c.Read(p)
				if err != nil {
					b.Fatal(err)
				}
				total += n
			}
		}
	})
}

// Read must not allocate, whatever the stream and wherever reads cut it.
func TestReadDoesNotAllocate(t *testing.T) {
	for _, s := range benchStreams {
		data := repeatTo(s.unit, 64<<10)
		for _, size := range []int{4096, 1000, 7} {
			c := NewConn(&loopConn{data: data}, Limits{})
			p := make([]byte, size)
			if allocs := testing.AllocsPerRun(1000, func() {
				if _, err := c.Read(p); err != nil {
					t.Fatal(err)
				}
			}); allocs != 0 {
				t.Errorf("%s, reads of %d: %v allocations per Read", s.name, size, allocs)
			}
		}
	}
}
