package guard

import (
	"errors"
	"io"
)

// Kinds of violation; every *Error wraps exactly one of them (and io.EOF).
var (
	// ErrProtocol: the stream broke the protocol or a Limits bound that
	// Redis answers with "-ERR Protocol error: ..."; that line was sent.
	ErrProtocol = errors.New("guard: protocol error")
	// ErrQueryBuffer: one command declared more than
	// Limits.MaxQueryBuffer bytes. Like Redis's client-query-buffer-limit,
	// no reply is sent.
	ErrQueryBuffer = errors.New("guard: query buffer limit reached")
	// ErrSecurity: a command named POST or Host: arrived, which means an
	// HTTP client (or a browser tricked into cross-protocol scripting) is
	// talking to us. Like Redis's securityWarningCommand, no reply is sent.
	ErrSecurity = errors.New("guard: possible cross-protocol attack (POST or Host: command)")
)

// Error is what Conn.Read returns once the guard has ended a connection, and
// what OnViolation receives. errors.Is(err, io.EOF) holds, so code that
// treats io.EOF as "client went away" (redcon does) closes quietly, and
// errors.Is(err, ErrProtocol) (or ErrQueryBuffer, ErrSecurity) tells why.
type Error struct {
	// Kind is ErrProtocol, ErrQueryBuffer or ErrSecurity.
	Kind error
	// Reason is Redis's wording of the condition, e.g.
	// "Protocol error: invalid bulk length".
	Reason string
	// Reply is the exact RESP line sent to the client before the
	// connection ended, e.g. "-ERR Protocol error: invalid bulk length\r\n",
	// or "" when nothing is sent.
	Reply string
}

func (e *Error) Error() string { return "guard: " + e.Reason }

// Unwrap returns Kind and io.EOF.
func (e *Error) Unwrap() []error { return []error{e.Kind, io.EOF} }

// verdict is the machine's decision about a stream; vNone while it is valid.
type verdict uint8

const (
	vNone verdict = iota
	vInvalidMultibulk
	vInvalidBulk
	vExpectedDollar
	vTooBigMultibulk
	vTooBigBulk
	vTooBigInline
	vUnbalanced
	vUnauthMultibulk
	vUnauthBulk
	vQueryBuffer
	vSecurity
)

// reasons holds Redis's wording for each verdict (vExpectedDollar is built).
var reasons = [...]string{
	vInvalidMultibulk: "Protocol error: invalid multibulk length",
	vInvalidBulk:      "Protocol error: invalid bulk length",
	vTooBigMultibulk:  "Protocol error: too big mbulk count string",
	vTooBigBulk:       "Protocol error: too big bulk count string",
	vTooBigInline:     "Protocol error: too big inline request",
	vUnbalanced:       "Protocol error: unbalanced quotes in request",
	vUnauthMultibulk:  "Protocol error: unauthenticated multibulk length",
	vUnauthBulk:       "Protocol error: unauthenticated bulk length",
	vQueryBuffer:      "closing client that reached max query buffer length",
	vSecurity:         "possible SECURITY ATTACK detected: POST or Host: command",
}

// newError builds the Error for v; got is the offending byte of
// vExpectedDollar.
func newError(v verdict, got byte) *Error {
	switch v {
	case vQueryBuffer:
		return &Error{Kind: ErrQueryBuffer, Reason: reasons[v]}
	case vSecurity:
		return &Error{Kind: ErrSecurity, Reason: reasons[v]}
	}
	reason := reasons[v]
	if v == vExpectedDollar {
		// Redis's addReplyErrorFormat turns CR and LF into spaces so the
		// reply stays one line.
		if got == '\r' || got == '\n' {
			got = ' '
		}
		reason = "Protocol error: expected '$', got '" + string([]byte{got}) + "'"
	}
	return &Error{Kind: ErrProtocol, Reason: reason, Reply: "-ERR " + reason + "\r\n"}
}
