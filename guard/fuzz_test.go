package guard

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
)

// fuzzLimits are small enough that random inputs reach every limit.
var fuzzLimits = Limits{
	MaxArgs:        8,
	MaxBulk:        100,
	MaxInline:      64,
	MaxQueryBuffer: 200,
	UnauthMaxArgs:  3,
	UnauthMaxBulk:  20,
}

// FuzzGuard feeds arbitrary bytes to a guarded connection, cut into socket
// reads by seed, and checks that
//   - nothing panics, and Read never returns 0, nil;
//   - the result does not depend on how the input was cut or on the size of
//     the reader's buffer;
//   - it matches the reference parser: redcon receives exactly the accepted
//     commands (a valid input passes through unchanged, ignored "*0" headers
//     aside), then at most a prefix of the rest of the input, and the client
//     gets Redis's error line for the first violation;
//   - redcon's own reader parses what it receives without a protocol error,
//     finding exactly the accepted commands.
//
// The seed corpus in testdata/fuzz/FuzzGuard holds the dangerous lengths
// (2^31-1, 2^31, 2^63-1, 19- and 20-digit numbers, negative and zero counts,
// a long inline line).
func FuzzGuard(f *testing.F) {
	for _, tc := range guardCases {
		if len(tc.in) < 4096 {
			f.Add([]byte(tc.in), uint64(len(tc.name)))
		}
	}
	// Bulk headers of one and two digits, which scan reads inline, beside
	// their neighbours that it must leave to shortNumberLine and the
	// byte-by-byte path (a leading zero, three digits, a sign, junk), with
	// each cut where the inline read needs its fifth byte.
	for _, h := range []string{"0", "5", "9", "00", "05", "10", "14", "99", "100", "-1", "+5", " 5", "1a", "1\n", "1\r\r"} {
		n, err := strconv.Atoi(h)
		if err != nil || n < 0 {
			n = 1
		}
		cmd := "*2\r\n$3\r\nGET\r\n$" + h + "\r\n" + strings.Repeat("k", n) + "\r\n"
		for _, seed := range []uint64{0, 1, 4 | 17<<3, 4 | 18<<3, 4 | 19<<3, 4 | 20<<3} {
			f.Add([]byte(cmd+cmd), seed)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, seed uint64) {
		lim := fuzzLimits
		if seed&1 != 0 {
			lim = DefaultLimits()
		}
		authed := seed&2 == 0
		readSize := 4096
		if seed&4 != 0 {
			readSize = 1 + int(seed>>3)%100
		}

		ref := reference(data, lim, authed)
		whole := feed(whole(data), lim, authed, 4096)
		if err := checkReference(data, whole, ref); err != nil {
			t.Fatalf("whole input: %v", err)
		}
		if ref.v == vNone && ref.tail == len(data) && !bytes.Equal(whole.out, ref.complete) {
			t.Fatalf("valid input %s passed as %s", abbrev(ref.complete), abbrev(whole.out))
		}
		cuts := [][][]byte{randomSplits(data, seed)}
		if len(data) <= 2048 {
			cuts = append(cuts, byteByByte(data))
		}
		for _, chunks := range cuts {
			split := feed(chunks, lim, authed, readSize)
			if !bytes.Equal(split.out, whole.out) || split.reply != whole.reply || split.err.Error() != whole.err.Error() {
				t.Fatalf("cut into %d reads of up to %d bytes: got %s %q %v; whole input gave %s %q %v",
					len(chunks), readSize, abbrev(split.out), split.reply, split.err, abbrev(whole.out), whole.reply, whole.err)
			}
		}
	})
}

// The reference's inline splitting must be redcon's: whenever redcon accepts
// a line, the reference finds the same words, and it rejects the lines redcon
// rejects.
func FuzzReferenceSplitMatchesRedcon(f *testing.F) {
	for _, s := range []string{"a b", `"a b" c`, `a"b`, `"a"b`, `'x\'y'`, `"\n\t\\"`, `""`, "  x  ", `"unterminated`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		if bytes.ContainsAny(line, "\n") || len(line) == 0 || line[0] == '*' {
			return
		}
		args, v := refSplit(line, 1<<30)
		got, err := redconArgs(append(bytes.Clone(line), '\r', '\n'))
		if (v != vNone) != (err != nil) {
			t.Fatalf("%q: reference verdict %d, redcon error %v", line, v, err)
		}
		if err != nil {
			return
		}
		if len(args) != len(got) {
			t.Fatalf("%q: reference %q, redcon %q", line, args, got)
		}
		for i := range args {
			if !bytes.Equal(args[i], got[i]) {
				t.Fatalf("%q: reference %q, redcon %q", line, args, got)
			}
		}
	})
}
