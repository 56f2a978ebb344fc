package guard

import (
	"errors"
	"fmt"
)

// Bounds on what Validate accepts.
const (
	// MaxArgsCeiling is the largest MaxArgs accepted: Redis 7's own
	// multibulk ceiling (INT_MAX). Memory is bounded by MaxQueryBuffer
	// whatever the count.
	MaxArgsCeiling = 1<<31 - 1
	// MaxBulkCeiling is the largest MaxBulk accepted: Redis's default
	// proto-max-bulk-len, 512 MB.
	MaxBulkCeiling = 512 * 1024 * 1024
	// MaxInlineCeiling is the largest MaxInline accepted. redcon allocates
	// about (line length × argument count) bytes while it splits an inline
	// line, so this is kept small.
	MaxInlineCeiling = 1024 * 1024
	// minInline keeps room for the longest valid header line,
	// "*-9223372036854775808" (21 bytes), since MaxInline also bounds
	// header lines.
	minInline = 64
)

// Limits bounds what one connection may send. A zero field means its default
// (see DefaultLimits), so Limits{} is usable. A Limits is a small value: copy
// it freely; the guard keeps its own copy.
type Limits struct {
	// MaxArgs is the largest argument count of one command, for a
	// multibulk "*<n>" header and for the words of an inline line.
	// Default 1024*1024, Redis 6's limit (Redis 7 takes up to INT_MAX;
	// either way what bounds memory is MaxQueryBuffer, which every
	// argument is charged against, see there). A larger multibulk count
	// is "invalid multibulk length"; an inline line with more words is
	// "too big inline request" (an inline line is at most MaxInline
	// bytes, so about MaxInline/2 words, as in Redis).
	MaxArgs int
	// MaxBulk is the largest "$<n>" bulk length. Default 512 KiB,
	// at most 512 MB (Redis's proto-max-bulk-len). A larger one is
	// "invalid bulk length".
	MaxBulk int64
	// MaxInline is the longest line the guard waits for: an inline
	// command, or a "*"/"$" header line, that has not ended after this
	// many bytes is "too big inline request" (or "too big mbulk/bulk
	// count string"). Default 64 KiB, Redis's PROTO_INLINE_MAX_SIZE.
	MaxInline int
	// MaxQueryBuffer caps the declared size of one multibulk command:
	// its header lines plus the sum of its bulk lengths plus their CRLFs,
	// plus ArgOverhead bytes per argument for the slice header the server
	// keeps for each (so a command of many tiny arguments is charged for
	// what it really costs: "*1048576" of empty bulks declares 30 MiB).
	// redcon holds a whole command in memory, grows its buffer by
	// doubling (so up to about twice this), and keeps that buffer for as
	// long as the connection lives, idle or not; so about 2×MaxQueryBuffer
	// per connection is the memory bound, and MaxClients times that the
	// server's. A command declaring more is refused the way Redis treats
	// client-query-buffer-limit: the connection is closed without a reply,
	// and OnViolation is called. Checked when a bulk header arrives, before
	// its payload is read. Default 1 MiB, or 2×MaxBulk when that is more:
	// room for two arguments of the largest size (Redis uses 1 GiB; a rate
	// limiter's commands are a few hundred bytes, and at 64 MiB a hundred
	// connections could pin 6 GiB). Must be at least MaxBulk.
	MaxQueryBuffer int64
	// UnauthMaxArgs replaces MaxArgs while the connection is not
	// authenticated (see RequireAuth). Default 10, as in Redis. A multibulk
	// count above it is "unauthenticated multibulk length".
	UnauthMaxArgs int
	// UnauthMaxBulk replaces MaxBulk while the connection is not
	// authenticated. Default 16384, as in Redis. A longer bulk is
	// "unauthenticated bulk length".
	UnauthMaxBulk int64
}

// ArgOverhead is what each argument of a multibulk command is charged
// against MaxQueryBuffer besides its bytes: the size of the []byte header
// the server keeps per argument (24 bytes on 64-bit platforms).
const ArgOverhead = 24

// Defaults of Limits.
const (
	DefaultMaxArgs        = 1024 * 1024
	DefaultMaxBulk        = 512 * 1024
	DefaultMaxInline      = 64 * 1024
	DefaultMaxQueryBuffer = 1024 * 1024
	DefaultUnauthMaxArgs  = 10
	DefaultUnauthMaxBulk  = 16 * 1024
)

// ErrLimits is wrapped by every error Limits.Validate returns.
var ErrLimits = errors.New("guard: invalid limits")

// DefaultLimits returns the defaults documented on each field of Limits.
func DefaultLimits() Limits {
	return Limits{
		MaxArgs:        DefaultMaxArgs,
		MaxBulk:        DefaultMaxBulk,
		MaxInline:      DefaultMaxInline,
		MaxQueryBuffer: DefaultMaxQueryBuffer,
		UnauthMaxArgs:  DefaultUnauthMaxArgs,
		UnauthMaxBulk:  DefaultUnauthMaxBulk,
	}
}

// withDefaults returns l with every zero field replaced by its default.
func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	if l.MaxArgs == 0 {
		l.MaxArgs = d.MaxArgs
	}
	if l.MaxBulk == 0 {
		l.MaxBulk = d.MaxBulk
	}
	if l.MaxInline == 0 {
		l.MaxInline = d.MaxInline
	}
	if l.MaxQueryBuffer == 0 {
		// Not just MaxBulk: a command carrying one argument of MaxBulk
		// bytes declares its headers and CRLFs besides.
		l.MaxQueryBuffer = max(d.MaxQueryBuffer, 2*l.MaxBulk)
	}
	if l.UnauthMaxArgs == 0 {
		l.UnauthMaxArgs = min(d.UnauthMaxArgs, l.MaxArgs)
	}
	if l.UnauthMaxBulk == 0 {
		l.UnauthMaxBulk = min(d.UnauthMaxBulk, l.MaxBulk)
	}
	return l
}

// Validate reports whether l, after zero fields take their defaults, is
// usable: every limit positive and within its ceiling, MaxQueryBuffer at
// least MaxBulk, and the unauthenticated limits no larger than the
// authenticated ones. The error wraps ErrLimits.
func (l Limits) Validate() error {
	l = l.withDefaults()
	switch {
	case l.MaxArgs < 1 || l.MaxArgs > MaxArgsCeiling:
		return fmt.Errorf("%w: MaxArgs %d not in [1, %d]", ErrLimits, l.MaxArgs, MaxArgsCeiling)
	case l.MaxBulk < 1 || l.MaxBulk > MaxBulkCeiling:
		return fmt.Errorf("%w: MaxBulk %d not in [1, %d]", ErrLimits, l.MaxBulk, MaxBulkCeiling)
	case l.MaxInline < minInline || l.MaxInline > MaxInlineCeiling:
		return fmt.Errorf("%w: MaxInline %d not in [%d, %d]", ErrLimits, l.MaxInline, minInline, MaxInlineCeiling)
	case l.MaxQueryBuffer < l.MaxBulk:
		return fmt.Errorf("%w: MaxQueryBuffer %d is less than MaxBulk %d", ErrLimits, l.MaxQueryBuffer, l.MaxBulk)
	case l.UnauthMaxArgs < 1 || l.UnauthMaxArgs > l.MaxArgs:
		return fmt.Errorf("%w: UnauthMaxArgs %d not in [1, MaxArgs=%d]", ErrLimits, l.UnauthMaxArgs, l.MaxArgs)
	case l.UnauthMaxBulk < 1 || l.UnauthMaxBulk > l.MaxBulk:
		return fmt.Errorf("%w: UnauthMaxBulk %d not in [1, MaxBulk=%d]", ErrLimits, l.UnauthMaxBulk, l.MaxBulk)
	}
	return nil
}
