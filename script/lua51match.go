package script

import (
	lua "github.com/yuin/gopher-lua"
)

// Lua 5.1's pattern matcher (lstrlib.c: match and its helpers), for
// string.find, match, gmatch and gsub. gopher-lua's own matcher (its pm
// package) compiles the whole pattern first and differs from Lua's where
// scripts can see it: %f (frontier) matches the wrong places, a malformed
// part the match never reaches is an error instead of no match, and %1
// after a position capture matches. This one walks the pattern as Lua's
// does, lazily, with Lua's error texts.
//
// Strings are as C sees them: the pattern ends at its first NUL, and
// reading the subject at its end gives the NUL that terminates every Lua
// string. Recursion depth is bounded by the pattern's length, as in Lua.
// A matchState is used by one call on one goroutine.

const (
	luaMaxCaptures = 32 // LUA_MAXCAPTURES
	capUnfinished  = -1
	capPosition    = -2
)

type matchState struct {
	L     *lua.LState
	src   string // the subject; src_init is 0, src_end len(src)
	pat   string // the pattern, cut at its first NUL
	level int
	cap   [luaMaxCaptures]struct{ init, len int }
}

// s returns the subject's byte at i, or the terminating NUL at its end.
func (ms *matchState) s(i int) int {
	if i < len(ms.src) {
		return int(ms.src[i])
	}
	return 0
}

// p returns the pattern's byte at i, or NUL past its end.
func (ms *matchState) p(i int) int {
	if i < len(ms.pat) {
		return int(ms.pat[i])
	}
	return 0
}

func (ms *matchState) checkCapture(l int) int {
	l -= '1'
	if l < 0 || l >= ms.level || ms.cap[l].len == capUnfinished {
		ms.L.RaiseError("invalid capture index")
	}
	return l
}

func (ms *matchState) captureToClose() int {
	for level := ms.level - 1; level >= 0; level-- {
		if ms.cap[level].len == capUnfinished {
			return level
		}
	}
	ms.L.RaiseError("invalid pattern capture")
	return 0
}

func (ms *matchState) classEnd(p int) int {
	c := ms.p(p)
	p++
	switch c {
	case '%':
		if ms.p(p) == 0 {
			ms.L.RaiseError("%s", "malformed pattern (ends with '%')")
		}
		return p + 1
	case '[':
		if ms.p(p) == '^' {
			p++
		}
		for { // look for a ']'
			if ms.p(p) == 0 {
				ms.L.RaiseError("malformed pattern (missing ']')")
			}
			c := ms.p(p)
			p++
			if c == '%' && ms.p(p) != 0 {
				p++ // skip escapes (e.g. '%]')
			}
			if ms.p(p) == ']' {
				break
			}
		}
		return p + 1
	}
	return p
}

// C-locale <ctype.h>.
func cIsAlpha(c int) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }
func cIsDigit(c int) bool { return '0' <= c && c <= '9' }
func cIsLower(c int) bool { return 'a' <= c && c <= 'z' }
func cIsUpper(c int) bool { return 'A' <= c && c <= 'Z' }
func cIsCntrl(c int) bool { return c < 32 || c == 127 }
func cIsSpace(c int) bool { return c == ' ' || '\t' <= c && c <= '\r' }
func cIsPunct(c int) bool { return c > 32 && c < 127 && !cIsAlpha(c) && !cIsDigit(c) }
func cIsXDigit(c int) bool {
	return cIsDigit(c) || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func matchClass(c, cl int) bool {
	var res bool
	lower := cl
	if cIsUpper(cl) {
		lower = cl + ('a' - 'A')
	}
	switch lower {
	case 'a':
		res = cIsAlpha(c)
	case 'c':
		res = cIsCntrl(c)
	case 'd':
		res = cIsDigit(c)
	case 'l':
		res = cIsLower(c)
	case 'p':
		res = cIsPunct(c)
	case 's':
		res = cIsSpace(c)
	case 'u':
		res = cIsUpper(c)
	case 'w':
		res = cIsAlpha(c) || cIsDigit(c)
	case 'x':
		res = cIsXDigit(c)
	case 'z':
		res = c == 0
	default:
		return cl == c
	}
	if cIsLower(cl) {
		return res
	}
	return !res
}

// matchBracketClass: p is at '[', ec at the class's closing ']'.
func (ms *matchState) matchBracketClass(c, p, ec int) bool {
	sig := true
	if ms.p(p+1) == '^' {
		sig = false
		p++
	}
	for p++; p < ec; p++ {
		switch {
		case ms.p(p) == '%':
			p++
			if matchClass(c, ms.p(p)) {
				return sig
			}
		case ms.p(p+1) == '-' && p+2 < ec:
			p += 2
			if ms.p(p-2) <= c && c <= ms.p(p) {
				return sig
			}
		case ms.p(p) == c:
			return sig
		}
	}
	return !sig
}

func (ms *matchState) singleMatch(c, p, ep int) bool {
	switch ms.p(p) {
	case '.':
		return true
	case '%':
		return matchClass(c, ms.p(p+1))
	case '[':
		return ms.matchBracketClass(c, p, ep-1)
	}
	return ms.p(p) == c
}

func (ms *matchState) matchBalance(s, p int) int {
	if ms.p(p) == 0 || ms.p(p+1) == 0 {
		ms.L.RaiseError("unbalanced pattern")
	}
	if ms.s(s) != ms.p(p) {
		return -1
	}
	b, e, cont := ms.p(p), ms.p(p+1), 1
	for s++; s < len(ms.src); s++ {
		switch ms.s(s) {
		case e:
			if cont--; cont == 0 {
				return s + 1
			}
		case b:
			cont++
		}
	}
	return -1
}

func (ms *matchState) maxExpand(s, p, ep int) int {
	i := 0
	for s+i < len(ms.src) && ms.singleMatch(ms.s(s+i), p, ep) {
		i++
	}
	for ; i >= 0; i-- {
		if res := ms.match(s+i, ep+1); res >= 0 {
			return res
		}
	}
	return -1
}

func (ms *matchState) minExpand(s, p, ep int) int {
	for {
		if res := ms.match(s, ep+1); res >= 0 {
			return res
		}
		if s < len(ms.src) && ms.singleMatch(ms.s(s), p, ep) {
			s++
		} else {
			return -1
		}
	}
}

func (ms *matchState) startCapture(s, p, what int) int {
	level := ms.level
	if level >= luaMaxCaptures {
		ms.L.RaiseError("too many captures")
	}
	ms.cap[level].init, ms.cap[level].len = s, what
	ms.level = level + 1
	res := ms.match(s, p)
	if res < 0 {
		ms.level--
	}
	return res
}

func (ms *matchState) endCapture(s, p int) int {
	l := ms.captureToClose()
	ms.cap[l].len = s - ms.cap[l].init
	res := ms.match(s, p)
	if res < 0 {
		ms.cap[l].len = capUnfinished
	}
	return res
}

func (ms *matchState) matchCapture(s, l int) int {
	l = ms.checkCapture(l)
	n := ms.cap[l].len
	if n < 0 { // a position capture: C compares (size_t)-2 bytes, never equal
		return -1
	}
	if len(ms.src)-s >= n && ms.src[ms.cap[l].init:ms.cap[l].init+n] == ms.src[s:s+n] {
		return s + n
	}
	return -1
}

// match is lstrlib's match: the end of the match of pattern[p:] at
// subject position s, or -1.
func (ms *matchState) match(s, p int) int {
	for {
		switch ms.p(p) {
		case '(':
			if ms.p(p+1) == ')' {
				return ms.startCapture(s, p+2, capPosition)
			}
			return ms.startCapture(s, p+1, capUnfinished)
		case ')':
			return ms.endCapture(s, p+1)
		case 0:
			return s
		case '%':
			switch ms.p(p + 1) {
			case 'b':
				if s = ms.matchBalance(s, p+2); s < 0 {
					return -1
				}
				p += 4
				continue
			case 'f':
				p += 2
				if ms.p(p) != '[' {
					ms.L.RaiseError("%s", "missing '[' after '%f' in pattern")
				}
				ep := ms.classEnd(p)
				prev := 0
				if s > 0 {
					prev = ms.s(s - 1)
				}
				if ms.matchBracketClass(prev, p, ep-1) || !ms.matchBracketClass(ms.s(s), p, ep-1) {
					return -1
				}
				p = ep
				continue
			}
			if cIsDigit(ms.p(p + 1)) {
				if s = ms.matchCapture(s, ms.p(p+1)); s < 0 {
					return -1
				}
				p += 2
				continue
			}
		case '$':
			if ms.p(p+1) == 0 {
				if s == len(ms.src) {
					return s
				}
				return -1
			}
		}
		// A single-character class, maybe followed by ?, *, + or -.
		ep := ms.classEnd(p)
		m := s < len(ms.src) && ms.singleMatch(ms.s(s), p, ep)
		switch ms.p(ep) {
		case '?':
			if m {
				if res := ms.match(s+1, ep+1); res >= 0 {
					return res
				}
			}
			p = ep + 1
		case '*':
			return ms.maxExpand(s, p, ep)
		case '+':
			if !m {
				return -1
			}
			return ms.maxExpand(s+1, p, ep)
		case '-':
			return ms.minExpand(s, p, ep)
		default:
			if !m {
				return -1
			}
			s++
			p = ep
		}
	}
}

// oneCapture is push_onecapture's value: capture i, or the whole match
// [s, e) when there are no captures and i is 0.
func (ms *matchState) oneCapture(i, s, e int) lua.LValue {
	if i >= ms.level {
		if i != 0 {
			ms.L.RaiseError("invalid capture index")
		}
		return lua.LString(ms.src[s:e])
	}
	c := ms.cap[i]
	switch c.len {
	case capUnfinished:
		ms.L.RaiseError("unfinished capture")
	case capPosition:
		return lua.LNumber(c.init + 1)
	}
	return lua.LString(ms.src[c.init : c.init+c.len])
}

// pushCaptures is push_captures: every capture, or the whole match [s, e)
// when there are none and whole is set.
func (ms *matchState) pushCaptures(s, e int, whole bool) int {
	n := ms.level
	if n == 0 && whole {
		n = 1
	}
	for i := 0; i < n; i++ {
		ms.L.Push(ms.oneCapture(i, s, e))
	}
	return n
}
