package main

import (
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/celld/celld/server"
)

// outputBufferFlag is --client-output-buffer-limit: Redis's
// client-output-buffer-limit for normal clients, in Redis's syntax
// ("normal <hard> <soft> <soft-seconds>", sizes like 64mb), parsed by
// server.ParseOutputBufferLimit. Default "normal 0 0 0": no limit, as
// Redis. A bad value, from the flag or CELLD_CLIENT_OUTPUT_BUFFER_LIMIT, is
// refused at start-up (exit 2).
type outputBufferFlag struct {
	limit  server.OutputBufferLimit
	envErr error // a bad CELLD_CLIENT_OUTPUT_BUFFER_LIMIT, reported by check
}

func (f *outputBufferFlag) String() string {
	if f == nil {
		return ""
	}
	return f.limit.String()
}

func (f *outputBufferFlag) Set(s string) error {
	lim, err := server.ParseOutputBufferLimit(s)
	if err != nil {
		return err
	}
	f.limit, f.envErr = lim, nil // the flag wins over a bad env value
	return nil
}

func registerOutputBufferFlags(fs *flag.FlagSet, f *outputBufferFlag) {
	if v, ok := os.LookupEnv("CELLD_CLIENT_OUTPUT_BUFFER_LIMIT"); ok {
		if err := f.Set(v); err != nil {
			f.envErr = fmt.Errorf("CELLD_CLIENT_OUTPUT_BUFFER_LIMIT: %w", err)
		}
	}
	fs.Var(f, "client-output-buffer-limit",
		`Redis's client-output-buffer-limit for normal clients: "normal <hard> <soft> <soft-seconds>", sizes like 64mb; a client whose unread replies reach <hard>, or stay at or above <soft> for more than <soft-seconds>, is closed. Default "normal 0 0 0": no limit, as Redis (env CELLD_CLIENT_OUTPUT_BUFFER_LIMIT)`)
}

// check reports a bad environment value the flag did not override.
func (f *outputBufferFlag) check() error {
	if f.envErr != nil {
		return f.envErr
	}
	if f.limit.Hard < 0 || f.limit.Soft < 0 || f.limit.SoftSeconds < 0 {
		return errors.New("--client-output-buffer-limit: negative value") // unreachable: the parser refuses them
	}
	return nil
}
