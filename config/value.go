package config

import (
	"fmt"
	"math"
	"net"
	"strconv"
	"strings"
	"time"
)

// value is one setting's parser bound to its Config field: set parses the
// text an operator wrote (a flag's argument, an environment variable's
// value or the table's default) and stores it, or returns what it wanted
// instead ("want ..."); it never stores a value it refused. meta is the
// placeholder --help shows after the flag ("N", "DURATION", "yes|no").
type value interface {
	set(s string) error
	meta() string
}

// boolWords are the spellings a boolean accepts, in any case: what people
// write in Redis configs (yes/no), YAML and env files (true/false, on/off),
// and shells (1/0).
var boolWords = map[string]bool{
	"true": true, "yes": true, "on": true, "1": true,
	"false": false, "no": false, "off": false, "0": false,
}

// ParseBool reads a boolean as every CELLD_* variable and flag does:
// true/false, yes/no, on/off, 1/0, in any case.
func ParseBool(s string) (bool, error) {
	if v, ok := boolWords[strings.ToLower(strings.TrimSpace(s))]; ok {
		return v, nil
	}
	return false, fmt.Errorf("want true/false, yes/no, on/off or 1/0")
}

type boolValue struct{ p *bool }

func (v boolValue) meta() string { return "yes|no" }
func (v boolValue) set(s string) error {
	b, err := ParseBool(s)
	if err == nil {
		*v.p = b
	}
	return err
}

// stringValue takes any text; check, when set, refuses some.
type stringValue struct {
	p     *string
	m     string
	check func(string) error
}

func (v stringValue) meta() string { return v.m }
func (v stringValue) set(s string) error {
	if v.check != nil {
		if err := v.check(s); err != nil {
			return err
		}
	}
	*v.p = s
	return nil
}

// hostPort checks a listen address: host:port with a numeric port
// (0-65535); the host may be empty (all interfaces) or a name. allowEmpty
// accepts "" (the setting is off).
func hostPort(allowEmpty bool) func(string) error {
	return func(s string) error {
		if s == "" {
			if allowEmpty {
				return nil
			}
			return fmt.Errorf("want host:port, not empty")
		}
		_, port, err := net.SplitHostPort(s)
		if err != nil {
			return fmt.Errorf("want host:port (e.g. 127.0.0.1:6379)")
		}
		if n, err := strconv.ParseUint(port, 10, 16); err != nil || n > 65535 {
			return fmt.Errorf("want host:port with a port from 0 to 65535")
		}
		return nil
	}
}

// enumValue takes one of choices, in any case, stored lower-cased.
type enumValue struct {
	p       *string
	choices []string
}

func (v enumValue) meta() string { return strings.Join(v.choices, "|") }
func (v enumValue) set(s string) error {
	l := strings.ToLower(strings.TrimSpace(s))
	for _, c := range v.choices {
		if l == c {
			*v.p = c
			return nil
		}
	}
	return fmt.Errorf("want one of %s", strings.Join(v.choices, ", "))
}

// intValue takes a decimal integer in [min, max].
type intValue struct {
	p        *int
	min, max int
}

func (v intValue) meta() string { return "N" }
func (v intValue) set(s string) error {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n < int64(v.min) || n > int64(v.max) {
		return fmt.Errorf("want a whole number from %d to %d", v.min, v.max)
	}
	*v.p = int(n)
	return nil
}

// bytesValue takes a size in bytes in [min, max], with Redis's units (any
// case): 1k = 1000, 1kb = 1024, 1m = 1000², 1mb = 1024², 1g = 1000³,
// 1gb = 1024³; a plain number is bytes.
type bytesValue struct {
	p        *int64
	min, max int64
}

func (v bytesValue) meta() string { return "SIZE" }
func (v bytesValue) set(s string) error {
	n, err := ParseBytes(s)
	if err != nil || n < v.min || n > v.max {
		return fmt.Errorf("want a size from %s to %s (bytes, or with a unit: 64kb, 512mb)", FormatBytes(v.min), FormatBytes(v.max))
	}
	*v.p = n
	return nil
}

// ParseBytes reads a size as Redis's configuration does (memtoll): a
// decimal number of bytes, optionally followed by k, kb, m, mb, g or gb in
// any case (k = 1000, kb = 1024, and so on). Negative sizes and overflow
// are errors.
func ParseBytes(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	mul := int64(1)
	for _, u := range []struct {
		suffix string
		mul    int64
	}{{"kb", 1 << 10}, {"mb", 1 << 20}, {"gb", 1 << 30}, {"k", 1e3}, {"m", 1e6}, {"g", 1e9}} {
		if strings.HasSuffix(t, u.suffix) {
			t, mul = strings.TrimSuffix(t, u.suffix), u.mul
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 || t == "" || t[0] == '+' {
		return 0, fmt.Errorf("config: %q is not a size", s)
	}
	if n > math.MaxInt64/mul {
		return 0, fmt.Errorf("config: %q is too large", s)
	}
	return n * mul, nil
}

// FormatBytes writes n the shortest exact way with a binary unit (512mb,
// 64kb), or as plain bytes.
func FormatBytes(n int64) string {
	switch {
	case n != 0 && n%(1<<30) == 0:
		return strconv.FormatInt(n>>30, 10) + "gb"
	case n != 0 && n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + "mb"
	case n != 0 && n%(1<<10) == 0:
		return strconv.FormatInt(n>>10, 10) + "kb"
	}
	return strconv.FormatInt(n, 10)
}

// durationValue takes a Go duration ("100ms", "10s", "1m30s") in [min, max].
type durationValue struct {
	p        *time.Duration
	min, max time.Duration
}

func (v durationValue) meta() string { return "DURATION" }
func (v durationValue) set(s string) error {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil || d < v.min || d > v.max {
		return fmt.Errorf("want a duration from %s to %s (e.g. 100ms, 10s)", fmtDur(v.min), fmtDur(v.max))
	}
	*v.p = d
	return nil
}

func fmtDur(d time.Duration) string {
	if d >= 1<<62 {
		return "unlimited"
	}
	return d.String()
}

// notEmpty refuses "" (for settings that cannot be off).
func notEmpty(s string) error {
	if s == "" {
		return fmt.Errorf("want a non-empty string")
	}
	return nil
}
