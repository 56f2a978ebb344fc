package server

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// partialScan says "complete" exactly when the command is whole, however
// the bytes arrive, and hands malformed commands to the real parser.
func TestPartialScan(t *testing.T) {
	cmds := []string{
		"*1\r\n$4\r\nPING\r\n",
		"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n",
		"*2\r\n$4\r\nECHO\r\n$12\r\n\r\n$1\r\nx\r\n*0\r\r\n",
		"*1000\r\n" + strings.Repeat("$1\r\nk\r\n", 1000),
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, cmd := range cmds {
		for trial := 0; trial < 50; trial++ {
			var p partialScan
			end := 0
			for end < len(cmd) {
				end += 1 + rng.IntN(8)
				if trial == 0 {
					end = min(end, len(cmd)) // byte-sized steps too
				}
				end = min(end, len(cmd))
				got := p.complete([]byte(cmd[:end]))
				if got != (end == len(cmd)) {
					t.Fatalf("%q[:%d]: complete = %v", cmd, end, got)
				}
			}
		}
	}
	for _, bad := range []string{"*x\r\n", "*1\r\nfoo\r\n", "*1\r\n$-1\r\n", "*-1\r\n", "*1\n", "*1\r\n$x\r\n"} {
		var p partialScan
		if !p.complete([]byte(bad)) {
			t.Errorf("%q: malformed, but complete = false", bad)
		}
	}
}
