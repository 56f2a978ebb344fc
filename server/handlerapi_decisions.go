package server

// Tracking precision for registered commands (the handler API,
// handlerapi.go): a command with Command.Modified tells WATCH and
// client-side caching which of its replies show a write. (Registered
// throttling commands count their decisions per limiter with Ctx.Decide:
// decisions.go.)

// extModified holds Command.Modified by command name. Written only by
// Register (init time).
var extModified = map[string]func(args [][]byte, reply []byte) bool{}
