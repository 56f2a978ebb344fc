// Package guard validates the Redis request stream before the server's
// reader (server/conn.go, parsing with redcon v1.6.4) sees it.
//
// redcon v1.6.4 trusts the lengths it is sent: "$9223372036854775807"
// overflows an index and panics the process inside redcon's goroutine, where
// no recover reaches; "*9223372036854775807" spins a core; a huge bulk sent
// slowly grows memory without bound; a long inline line without '\n' is
// rescanned on every read (O(n²)); and "POST / HTTP/1.1" runs as a command.
// So the server listens through a Listener, whose connections are *Conn: a
// net.Conn whose Read passes on only bytes that belong to valid commands,
// checking each "*" and "$" header and the length of inline lines as the bytes
// arrive, and which ends a bad stream the way Redis does:
//
//	-ERR Protocol error: invalid multibulk length      count not a number, or > MaxArgs
//	-ERR Protocol error: invalid bulk length           length not a number, < 0, or > MaxBulk
//	-ERR Protocol error: expected '$', got 'x'
//	-ERR Protocol error: too big mbulk count string    header line > MaxInline without '\r'
//	-ERR Protocol error: too big bulk count string
//	-ERR Protocol error: too big inline request        inline line > MaxInline without '\n',
//	                                                    or more than MaxArgs words
//	-ERR Protocol error: unbalanced quotes in request
//	-ERR Protocol error: unauthenticated multibulk length   before AUTH: > UnauthMaxArgs
//	-ERR Protocol error: unauthenticated bulk length        before AUTH: > UnauthMaxBulk
//	(no reply)                                         a command declaring > MaxQueryBuffer
//	(no reply)                                         a command named POST or Host:
//
// The error line follows the replies to the commands before the bad one, then
// Read returns an *Error (which wraps io.EOF) and the server closes the
// connection without writing its own error.
//
// What the server is given, compared with what Redis accepts:
//
//   - Numbers are read the way Redis's string2ll reads them: digits with an
//     optional leading '-', no '+', no leading zeros, no "-0", within int64.
//   - "*0\r\n", "*-1\r\n" and every count <= 0 are ignored by Redis and
//     rejected by redcon ("invalid multibulk length"), so the guard drops
//     them: the connection stays open and nothing runs.
//   - Empty and blank inline lines pass through; redcon skips them, as Redis
//     does.
//   - Where redcon is stricter than Redis the guard reports redcon's
//     condition in Redis's words: a header line must end in "\r\n" (not a lone
//     '\r' or '\n'), a bulk's payload must be followed by "\r\n" (else invalid
//     bulk length), and inline lines are split like redcon splits them (a
//     quote only at a word's start, else unbalanced quotes).
//   - The POST / Host: check applies to the first argument of any command,
//     inline or multibulk, like Redis's processCommand.
//
// Memory and cost: a Conn validates in place in the caller's buffer and keeps
// O(1) state — a 32-byte hold for a header line split across reads, and a
// stash of input read but not yet handed over (at most 4 KiB while
// unauthenticated, 64 KiB after, freed when drained if larger than 4 KiB).
// Bulk payloads are passed through as they arrive and skipped by length. A
// Read returns whole commands, or part of a single command, never whole
// commands followed by the start of the next (that start waits in the
// stash): redcon's Reader grows its buffer whenever a read fills it and ends
// inside a command, without compacting the commands it has already parsed,
// so a pipeline cut mid-command read after read would otherwise grow it
// without bound. With that, what redcon buffers is bounded by MaxBulk per
// argument and about twice MaxQueryBuffer per connection (MaxQueryBuffer
// charges every argument ArgOverhead bytes besides its own, so a command of
// a million empty arguments is as bounded as one of a few large ones; the
// argument count itself, MaxArgs, defaults to Redis 6's 1024*1024) — and redcon keeps
// that buffer for the life of the connection, so MaxClients × 2 ×
// MaxQueryBuffer bounds the server's query buffers.
// A partial command is handed over in pieces the size of the reader's
// buffer, not as it trickles in, so redcon's rescans of a partial inline
// line cost about MaxInline²/4096 byte comparisons at worst. A Read does not
// allocate, except the stash's buffer once.
package guard
