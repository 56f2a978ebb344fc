package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"

	"github.com/celld/celld/guard"
)

// limitsConfig is the part of the protocol guard's request limits that
// Redis has as settings beside proto-max-bulk-len (access.go): how many
// arguments one command may carry, and how many bytes one command may
// declare (Redis's client-query-buffer-limit). The lead ports these into
// config/ with the other flags.
type limitsConfig struct {
	// maxMultibulk is --max-multibulk-len: the largest "*<n>" count and
	// the most words of an inline line. Default 1048576, Redis 6's
	// limit; at most 2147483647, Redis 7's.
	maxMultibulk int64
	// queryBuffer is --client-query-buffer-limit in bytes: the most one
	// command may declare (its headers, payloads, and guard.ArgOverhead
	// per argument). 0: twice --proto-max-bulk-len, at least 1 MiB.
	queryBuffer int64
	// envErr is a CELLD_* value that did not parse, reported by validate.
	envErr error
}

// registerLimitsFlags registers --max-multibulk-len and
// --client-query-buffer-limit, with their CELLD_* environment defaults.
func registerLimitsFlags(fs *flag.FlagSet, l *limitsConfig) {
	l.maxMultibulk = l.envInt("CELLD_MAX_MULTIBULK_LEN", guard.DefaultMaxArgs)
	l.queryBuffer = l.envInt("CELLD_CLIENT_QUERY_BUFFER_LIMIT", 0)
	fs.Int64Var(&l.maxMultibulk, "max-multibulk-len", l.maxMultibulk,
		"most arguments one command may carry (a multibulk count, or the words of an inline line), 1 to 2147483647 (env CELLD_MAX_MULTIBULK_LEN)")
	fs.Int64Var(&l.queryBuffer, "client-query-buffer-limit", l.queryBuffer,
		"most bytes one command may declare, each argument counted with 24 bytes of overhead; bounds a connection's query memory at about twice this; 0 = twice --proto-max-bulk-len, at least 1 MiB (env CELLD_CLIENT_QUERY_BUFFER_LIMIT)")
}

// envInt reads an integer environment default, remembering a bad value.
func (l *limitsConfig) envInt(name string, def int64) int64 {
	v, ok := os.LookupEnv(name)
	if !ok || v == "" {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil && l.envErr == nil {
		l.envErr = fmt.Errorf("%s=%q: not an integer", name, v)
	}
	return n
}

// validate reports a bad environment value or flag value; maxBulk is
// --proto-max-bulk-len, which the query buffer limit may not be below.
func (l *limitsConfig) validate(maxBulk int64) error {
	switch {
	case l.envErr != nil:
		return l.envErr
	case l.maxMultibulk < 1 || l.maxMultibulk > guard.MaxArgsCeiling:
		return fmt.Errorf("--max-multibulk-len must be 1 to %d, not %d", guard.MaxArgsCeiling, l.maxMultibulk)
	case l.queryBuffer < 0:
		return fmt.Errorf("--client-query-buffer-limit must be 0 (derived) or positive, not %d", l.queryBuffer)
	case l.queryBuffer != 0 && l.queryBuffer < maxBulk:
		return fmt.Errorf("--client-query-buffer-limit %d is less than --proto-max-bulk-len %d", l.queryBuffer, maxBulk)
	}
	return nil
}

// apply sets the guard limits these flags control.
func (l limitsConfig) apply(lim *guard.Limits) {
	lim.MaxArgs = int(l.maxMultibulk)
	lim.MaxQueryBuffer = l.queryBuffer
	// Derived again from MaxArgs: the unauthenticated count may not
	// exceed it.
	lim.UnauthMaxArgs = 0
}
