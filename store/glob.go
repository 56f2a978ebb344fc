package store

// Match reports whether s matches the Redis glob pattern p, with Redis's
// rules (stringmatchlen): '*' any run, '?' any one byte, '[abc]', '[^a-z]'
// classes with ranges (reversed ranges allowed), and '\' escaping the next
// byte. Matching is byte-wise and case-sensitive.
//
// It backtracks only to the most recent '*', so it runs in O(len(p)·len(s))
// at worst: patterns like "*a*a*a*b" cannot make it exponential.
func Match(p, s string) bool {
	if len(s) == 0 {
		// Redis's loop runs only while both are non-empty: an empty string
		// matches only the empty pattern (so not even "*").
		return len(p) == 0
	}
	pi, si := 0, 0
	starP, starS := -1, 0
	for si < len(s) {
		if pi < len(p) {
			switch c := p[pi]; c {
			case '*':
				for pi < len(p) && p[pi] == '*' {
					pi++
				}
				if pi == len(p) {
					return true
				}
				starP, starS = pi, si
				continue
			case '?':
				pi++
				si++
				continue
			case '[':
				if ok, next := matchClass(p, pi, s[si]); ok {
					pi = next
					si++
					continue
				}
			case '\\':
				q := pi
				if pi+1 < len(p) {
					q = pi + 1
				}
				if p[q] == s[si] {
					pi = q + 1
					si++
					continue
				}
			default:
				if c == s[si] {
					pi++
					si++
					continue
				}
			}
		}
		if starP < 0 {
			return false
		}
		starS++
		pi, si = starP, starS
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}

// matchClass matches byte c against the class that opens at p[i] == '['. It
// returns whether c matched and the index just past the class. An unclosed
// class runs to the end of the pattern, as in Redis.
func matchClass(p string, i int, c byte) (bool, int) {
	i++
	not := i < len(p) && p[i] == '^'
	if not {
		i++
	}
	match := false
	for i < len(p) {
		switch {
		case p[i] == '\\' && i+1 < len(p):
			i++
			if p[i] == c {
				match = true
			}
		case p[i] == ']':
			if not {
				match = !match
			}
			return match, i + 1
		case i+2 < len(p) && p[i+1] == '-':
			lo, hi := p[i], p[i+2]
			if lo > hi {
				lo, hi = hi, lo
			}
			if c >= lo && c <= hi {
				match = true
			}
			i += 2
		case p[i] == c:
			match = true
		}
		i++
	}
	if not {
		match = !match
	}
	return match, i
}
