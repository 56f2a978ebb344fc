package script

import (
	"unsafe"

	lua "github.com/yuin/gopher-lua"
)

// MemStats is the engine's memory as INFO memory reports it.
type MemStats struct {
	// Scripts is the number of cached scripts (number_of_cached_scripts).
	Scripts int
	// ScriptBytes estimates the cache's memory (used_memory_scripts_eval):
	// each script's body, SHA1 and compiled code, and its cache entries.
	ScriptBytes int64
	// VMBytes estimates the idle Lua states' memory (used_memory_lua,
	// used_memory_vm_eval): VMStates times VMStateBytes.
	VMBytes  int64
	VMStates int
}

// VMStateBytes is what one pooled Lua state holds: the bytes newVM
// allocates (its registry of 4096 values, a fixed call stack of 1000
// frames, the libraries and the redis table), as TestVMStateBytes
// measures it (it fails if this is more than 25% off). gopher-lua does not
// account its memory, so this stands for a count Redis gets from Lua's
// allocator.
const VMStateBytes = 245 << 10

// MemStats returns the engine's memory figures. It takes the cache's and
// the pool's locks briefly: O(1) (the cache's estimate is kept as scripts
// come and go, scriptBytes).
func (e *Engine) MemStats() MemStats {
	var m MemStats
	e.mu.Lock()
	m.Scripts = len(e.bySHA)
	m.ScriptBytes = e.bytes
	e.mu.Unlock()
	if e.idle.Load() != nil {
		m.VMStates++
	}
	e.poolMu.Lock()
	m.VMStates += len(e.pool)
	e.poolMu.Unlock()
	m.VMBytes = int64(m.VMStates) * VMStateBytes
	return m
}

// scriptBytes estimates one cached script's memory: two map entries (by
// SHA1 and by body) of a string key and a pointer, the compiled struct,
// the strings, the code. O(the script's compiled code).
func scriptBytes(s *compiled) int64 {
	n := int64(2*(unsafe.Sizeof("")+unsafe.Sizeof(s)) + unsafe.Sizeof(*s))
	n += int64(len(s.sha) + len(s.body))
	return n + protoBytes(s.proto)
}

// protoBytes estimates a compiled function's memory: its instructions,
// constants, debug tables and nested functions.
func protoBytes(p *lua.FunctionProto) int64 {
	if p == nil {
		return 0
	}
	// The struct, and the 32 slots of its unexported string constants,
	// which compile leaves at their initial capacity (clipProto).
	n := int64(unsafe.Sizeof(*p)) + 32*int64(unsafe.Sizeof(""))
	n += int64(len(p.Code)) * 4
	n += int64(len(p.Constants)) * int64(unsafe.Sizeof(lua.LValue(nil)))
	for _, c := range p.Constants {
		if s, ok := c.(lua.LString); ok {
			n += int64(len(s))
		}
	}
	n += int64(len(p.DbgSourcePositions)) * 8
	n += int64(len(p.DbgLocals)) * int64(unsafe.Sizeof(lua.DbgLocalInfo{})+unsafe.Sizeof(&lua.DbgLocalInfo{}))
	n += int64(len(p.DbgCalls)) * int64(unsafe.Sizeof(lua.DbgCall{}))
	n += int64(len(p.DbgUpvalues)) * int64(unsafe.Sizeof(""))
	n += int64(len(p.SourceName))
	for _, q := range p.FunctionPrototypes {
		n += 8 + protoBytes(q)
	}
	return n
}
