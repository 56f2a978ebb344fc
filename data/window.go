// Package data holds the handlers of celld's commands that live beside
// package server and join its dispatch table through server.Register
// (design.md, "data handlers"). Each file registers its commands from an
// init function; main imports the package for that effect.
package data

import (
	"errors"

	"github.com/celld/celld/server"
	"github.com/celld/celld/store"
	"github.com/celld/celld/window"
)

// CL.WINDOW (spec/windows.md, docs/cl-window.md):
//
//	CL.WINDOW <key> <limit> <window_ms> [<quantity>] [LOG | SLIDING | FIXED]
//
// One atomic counting-window decision with CL.THROTTLE's five-integer
// reply, times in ms. The handler runs on the caller's goroutine (or in
// EXEC or a script), reads the clock once, and allocates nothing for an
// existing key.

func init() {
	server.Register(server.Command{
		Name: "cl.window", Arity: -4, Flags: "write denyoom fast", FirstKey: 1, LastKey: 1, Step: 1,
		ACL: "write fast", Group: "generic", Since: "0.1.0",
		Summary: "Counts a call against a sliding log, fixed or sliding-counter window; replies like CL.THROTTLE, in milliseconds.",
		Run:     cmdWindow, Modified: windowModified, PrefetchWindow: windowInBlock,
	})
	decWindow = server.RegisterDecisionCommand("cl.window")
}

// decWindow is CL.WINDOW's row in the per-limiter decision counters.
var decWindow server.DecisionCmd

// The error replies (Redis style: redis-cell has no such command to copy).
const (
	winErrArgs     = "ERR wrong number of arguments for 'cl.window' command"
	winErrNotInt   = "ERR value is not an integer or out of range"
	winErrLimit    = "ERR limit must be at least 1"
	winErrWindow   = "ERR window_ms must be at least 1"
	winErrQuantity = "ERR quantity must not be negative"
	winErrSyntax   = "ERR syntax error"
	winErrCorrupt  = "ERR the window state stored at this key is damaged"
	winErrOOM      = "OOM command not allowed when used memory > 'maxmemory'."
)

// cmdWindow parses, decides through store.Store.Window and replies.
func cmdWindow(x *server.Ctx) {
	args := x.Args()
	if len(args) > 6 {
		x.Error(winErrArgs)
		return
	}
	limit, ok := windowInt(args[2])
	if !ok {
		x.Error(winErrNotInt)
		return
	}
	w, ok := windowInt(args[3])
	if !ok {
		x.Error(winErrNotInt)
		return
	}
	q, mode := int64(1), window.Log
	switch len(args) {
	case 5: // quantity or mode
		if m, isMode := window.ParseMode(args[4]); isMode {
			mode = m
		} else if q, ok = windowInt(args[4]); !ok {
			x.Error(winErrNotInt)
			return
		}
	case 6:
		if q, ok = windowInt(args[4]); !ok {
			x.Error(winErrNotInt)
			return
		}
		if mode, ok = window.ParseMode(args[5]); !ok {
			x.Error(winErrSyntax)
			return
		}
	}
	switch {
	case limit < 1:
		x.Error(winErrLimit)
		return
	case w < 1:
		x.Error(winErrWindow)
		return
	case q < 0:
		x.Error(winErrQuantity)
		return
	}
	// The decision is written into r (WindowTo), not returned: a returned
	// Result was copied at each return with loads the CPU could not
	// forward from the stores that made it (store.Store.WindowTo).
	var r window.Result
	if err := x.Store().WindowTo(&r, args[1], window.Limit{Mode: mode, Limit: limit, WindowMs: w}, q, x.NowMs()); err != nil {
		switch {
		case errors.Is(err, store.ErrWrongType):
			x.WrongType()
		case errors.Is(err, store.ErrOOM):
			x.Error(winErrOOM)
		default:
			x.Error(winErrCorrupt)
		}
		return
	}
	// The one place CL.WINDOW's decisions are counted (per limiter, with
	// shadow mode: a shadowed denial is answered as allowed, as
	// CL.THROTTLE's, and was not written).
	if x.Decide(decWindow, args[1], r.Limited, r.Limit, r.Remaining) == server.VerdictShadowDenied {
		r.Limited, r.Remaining, r.RetryAfter = false, 0, -1
		x.NoWrite()
	}
	limited := int64(0)
	if r.Limited {
		limited = 1
	}
	x.IntArray(limited, r.Limit, r.Remaining, r.RetryAfter, r.ResetAfter)
}

// windowInt is parseInt (Redis's integer rule) with an inlined fast path
// for what CL.WINDOW's arguments almost always are: 1 to 18 digits
// without a sign or a leading zero, which cannot overflow an int64, so
// the loop checks nothing but the digits. Anything else (a sign, "0",
// 19 or more digits, junk) goes to parseInt, with its answer.
func windowInt(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 18 || b[0] < '1' || b[0] > '9' {
		return parseInt(b)
	}
	var n int64
	for _, c := range b {
		if c-'0' > 9 {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// windowInBlock tells a pipelined batch which CL.WINDOW calls to
// prefetch the window block of (server.Command.PrefetchWindow): LOG's,
// the default mode, whose state is a block in the shard's window heap.
// A FIXED or SLIDING key keeps its counters in its entry (store/window.go,
// "Inline counters"; only a key name over 16 bytes puts them in a block,
// whose one line the call then loads itself), so prefetching it would
// cost a shard lock and a lookup for nothing: in a CPU profile of FIXED at
// pipeline 16 that was ~8 % of celld's CPU.
//
// It runs in the parser for every CL.WINDOW, so it reads one byte: the
// last argument's first letter, case-insensitively (c|0x20 maps only 'F'
// and 'f' onto 'f', 'S' and 's' onto 's'). 'f' or 's' is taken for FIXED
// or SLIDING without the full parse (window.ParseMode), which the handler
// does anyway; a quantity starts with a digit or a sign, LOG with 'l'. A
// wrong guess is an argument that the handler answers with an error
// ("SLOW": a syntax error), and it only skips a prefetch.
func windowInBlock(args [][]byte) bool {
	if n := len(args); n == 5 || n == 6 {
		if a := args[n-1]; len(a) > 0 {
			switch a[0] | 0x20 {
			case 'f', 's':
				return false
			}
		}
	}
	return true
}

// windowModified tells WATCH and client-side caching which calls wrote
// the key: an allowed one (*5 :0) whose quantity is not 0 (a peek).
func windowModified(args [][]byte, reply []byte) bool {
	const allowed = "*5\r\n:0\r\n"
	if len(reply) < len(allowed) || string(reply[:len(allowed)]) != allowed {
		return false
	}
	if len(args) >= 5 && string(args[4]) == "0" { // Redis integer syntax: "0" is the only zero
		return false
	}
	return true
}
