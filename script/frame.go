package script

import (
	"reflect"
	"unsafe"

	lua "github.com/yuin/gopher-lua"
)

// Discarded results. A redis.call written as a statement,
//
//	redis.call('HMSET', KEYS[1], 'water', water, 'lastTime', now)
//
// throws its reply away, yet converting the reply costs most of what the
// call costs on the Lua side: a status reply is a table with a string key
// (in gopher-lua a table, two maps and a slice). gopher-lua tells a Go
// function nothing of how many results its caller wants, but it keeps that
// number in the call frame it pushes for the function (callFrame.NRet: C-1
// of the OP_CALL, the caller's own for a tail call, MultRet for calls made
// from Go such as pcall's). resultsWanted reads it through the offsets
// reflect finds once at start-up; if gopher-lua's unexported layout ever
// changes so that they are not found, it answers "unknown" and every reply
// is converted as before.

// frameLayout: byte offsets of LState.currentFrame and callFrame.NRet.
var frameLayout = func() (l struct {
	cur, nret uintptr
	ok        bool
}) {
	cf, ok := reflect.TypeOf(lua.LState{}).FieldByName("currentFrame")
	if !ok || cf.Type.Kind() != reflect.Pointer || cf.Type.Elem().Kind() != reflect.Struct {
		return l
	}
	nr, ok := cf.Type.Elem().FieldByName("NRet")
	if !ok || nr.Type.Kind() != reflect.Int {
		return l
	}
	l.cur, l.nret, l.ok = cf.Offset, nr.Offset, true
	return l
}()

// resultsWanted returns how many results the caller of the Go function
// now running on L wants: 0 for a call whose results are discarded, n for
// a call adjusted to n, lua.MultRet (-1) for all of them or when it cannot
// tell. Only the goroutine running L may call it; it costs two loads.
func resultsWanted(L *lua.LState) int {
	if !frameLayout.ok {
		return lua.MultRet
	}
	frame := *(*unsafe.Pointer)(unsafe.Add(unsafe.Pointer(L), frameLayout.cur))
	if frame == nil {
		return lua.MultRet
	}
	return *(*int)(unsafe.Add(frame, frameLayout.nret))
}

// plainReply reports whether b is one status or integer reply and nothing
// else: a reply a discarded redis.call or redis.pcall need not convert,
// since converting it can neither fail nor raise.
func plainReply(b []byte) bool {
	if len(b) == 0 || (b[0] != '+' && b[0] != ':') {
		return false
	}
	hdr, rest, ok := line(b)
	if !ok || len(rest) != 0 {
		return false
	}
	if b[0] == ':' {
		_, ok = parseInt(hdr)
	}
	return ok
}
