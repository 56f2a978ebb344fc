package script

// CallerHost is a Host that wants to know, while a script runs on its Lua
// state, who called the script: Engine.Eval and EvalSHA call SetCaller with
// Options.Caller before the script runs and with nil after it, on the
// calling goroutine. A server uses it to act for the calling client —
// Redis remembers a script's keys for the caller's client-side caching
// when the script reads. Optional: a plain Host is never told.
type CallerHost interface {
	Host
	SetCaller(caller any)
}
