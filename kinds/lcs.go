package kinds

// LCS is Redis 7's longest common subsequence of two strings (the LCS
// command, t_string.c lcsCommand), computed the same way so that ties are
// broken as Redis breaks them: the dynamic-programming table of LCS
// lengths, then one walk back from its corner.

// LCSMatch is one range of the walk back: a[AStart..AEnd] equals
// b[BStart..BEnd] (inclusive byte offsets), Len bytes long.
type LCSMatch struct {
	AStart, AEnd, BStart, BEnd, Len int
}

// LCSTableBytes is the transient memory LCS takes for strings of these
// lengths (Redis refuses it above proto-max-bulk-len).
func LCSTableBytes(alen, blen int) uint64 {
	return uint64(alen+1) * uint64(blen+1) * 4
}

// LCS returns the length of the longest common subsequence of a and b and,
// when walk is set, the subsequence itself and the matched ranges (those
// of at least minLen bytes, longest offsets first, as Redis emits them).
// Time O(len(a)·len(b)), memory LCSTableBytes.
func LCS(a, b string, walk bool, minLen int64) (n int, lcs []byte, matches []LCSMatch) {
	alen, blen := len(a), len(b)
	w := blen + 1
	t := make([]uint32, (alen+1)*w)
	for i := 1; i <= alen; i++ {
		row, prev := t[i*w:(i+1)*w], t[(i-1)*w:i*w]
		ai := a[i-1]
		for j := 1; j <= blen; j++ {
			switch {
			case ai == b[j-1]:
				row[j] = prev[j-1] + 1
			case prev[j] > row[j-1]:
				row[j] = prev[j]
			default:
				row[j] = row[j-1]
			}
		}
	}
	n = int(t[alen*w+blen])
	if !walk {
		return n, nil, nil
	}
	lcs = make([]byte, n)
	idx := n
	// aStart == alen means no range is open.
	aStart, aEnd, bStart, bEnd := alen, 0, 0, 0
	for i, j := alen, blen; i > 0 && j > 0; {
		emit := false
		if a[i-1] == b[j-1] {
			lcs[idx-1] = a[i-1]
			if aStart == alen {
				aStart, aEnd, bStart, bEnd = i-1, i-1, j-1, j-1
			} else if aStart == i && bStart == j {
				aStart--
				bStart--
			} else {
				emit = true
			}
			if aStart == 0 || bStart == 0 {
				emit = true
			}
			idx--
			i--
			j--
		} else {
			if t[(i-1)*w+j] > t[i*w+j-1] {
				i--
			} else {
				j--
			}
			if aStart != alen {
				emit = true
			}
		}
		if emit {
			if l := aEnd - aStart + 1; minLen == 0 || int64(l) >= minLen {
				matches = append(matches, LCSMatch{aStart, aEnd, bStart, bEnd, l})
			}
			aStart = alen
		}
	}
	return n, lcs, matches
}
