package data

import (
	"github.com/celld/celld/server"
)

// MEMORY USAGE key [SAMPLES n]: the bytes the store charges key (its
// entry, name and value; store.KeyMemory), the figure maxmemory counts.
// MEMORY's other subcommands are Redis's allocator reports and have no
// celld counterpart.
func init() {
	server.Register(server.Command{Name: "memory", Arity: -2, Flags: "readonly", FirstKey: 2, LastKey: 2, Step: 1,
		ACL: "read slow", Group: "server", Since: "4.0.0", Summary: "Estimates the memory usage of a key.", Run: memoryCmd})
}

func memoryCmd(x *server.Ctx) {
	args := x.Args()
	if !is(args[1], "usage") {
		x.Error("ERR unknown subcommand '" + string(args[1]) + "'. Try MEMORY HELP.")
		return
	}
	if len(args) < 3 {
		x.Error("ERR wrong number of arguments for 'memory|usage' command")
		return
	}
	if len(args) != 3 {
		if len(args) != 5 || !is(args[3], "samples") {
			x.Error(errSyntaxText)
			return
		}
		if _, ok := parseInt(args[4]); !ok {
			x.Error(errNotInt)
			return
		}
	}
	n, ok := x.Store().KeyMemory(args[2], x.NowMs())
	if !ok {
		x.Null()
		return
	}
	x.Int(n)
}
