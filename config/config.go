// Package config is celld's one configuration layer: it reads the command
// line and the CELLD_* environment with the same parsers, refuses anything
// it cannot read (a bad value, an unknown flag, a stray word) with one line
// that names the flag, the variable and the value, and checks the settings
// against each other (Validate), all before main opens a file or a port.
//
// Precedence: a flag beats its variable, which beats the default. A
// variable that is set is parsed even when a flag overrides it: a typo in
// the environment is reported, not hidden until the flag goes away.
//
// Only main calls Parse; packages below it take their options as plain
// structs (design.md). The package imports the standard library only.
//
// # How to add a setting
//
//  1. Add a documented field to Config (unit, what zero means).
//
//  2. Add one row to table (settings.go): the flag's Name without "--"
//     (the variable is CELLD_ + Name upper-cased with '-' → '_'), its
//     Group in --help, its Default written as an operator would write it,
//     a one-line Usage, and bind, choosing the parser:
//
//     boolValue{&c.X}                         yes/no/true/false/on/off/1/0
//     intValue{p: &c.X, min: 1, max: 100}     whole number in a range
//     bytesValue{p: &c.X, min: 1, max: 1<<30} size with Redis units (512mb)
//     durationValue{p: &c.X, min: 0, max: time.Second}
//     enumValue{&c.X, []string{"a", "b"}}     one word of a list, any case
//     stringValue{p: &c.X, m: "PATH", check: hostPort(true)}
//
//     For a parser of a new kind, implement value (value.go): a compound
//     value such as Redis's client-output-buffer-limit ("normal 0 0 0
//     pubsub 32mb 8mb 60") gets its own type whose set parses the whole
//     text into a struct field and says what it wanted on error.
//
//     Example, a memory bound:
//
//     {Name: "maxmemory", Group: Tuning, Default: "0",
//     Usage: "memory for keys (Redis units: 100mb, 1gb); 0 = no limit",
//     bind: func(c *Config) value { return bytesValue{p: &c.MaxMemory, min: 0, max: math.MaxInt64} }},
//
//     gives --maxmemory SIZE and CELLD_MAXMEMORY, refuses "-1", "lots" and
//     "1tb" naming both, and lists it under Tuning in --help.
//
//  3. A rule that involves two settings goes in Config.Validate.
//
//  4. Regenerate docs/configuration.md's table:
//     CELLD_UPDATE_DOCS=1 go test -run TestConfigurationDoc . (a test fails
//     until you do). TestEveryTableRowParses and TestGarbageRefused check
//     the row itself; add its range to TestRanges.
//
// --help, the variable, the error texts and the defaults all come from the
// row; nothing else needs to change.
package config

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
)

// ErrStray is wrapped by the error for a word on the command line that is
// not a flag or a flag's value.
var ErrStray = errors.New("config: unexpected argument")

// Error is a value that could not be read: which setting, where the value
// came from, and what was wanted. Its text is one line naming the flag, the
// variable and the value.
type Error struct {
	Flag    string // "--maxclients", or "" for a variable with no flag
	Env     string // "CELLD_MAXCLIENTS"
	Value   string
	FromEnv bool
	Err     error // what the parser wanted
}

func (e *Error) Error() string {
	if e.FromEnv {
		if e.Flag == "" {
			return fmt.Sprintf("%s=%q: %v", e.Env, e.Value, e.Err)
		}
		return fmt.Sprintf("%s=%q (--%s): %v", e.Env, e.Value, strings.TrimPrefix(e.Flag, "--"), e.Err)
	}
	return fmt.Sprintf("%s %q (env %s): %v", e.Flag, e.Value, e.Env, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// envName is a row's variable.
func (s *setting) envName() string {
	if s.Env != "" {
		return s.Env
	}
	return "CELLD_" + strings.ToUpper(strings.ReplaceAll(s.Name, "-", "_"))
}

func (s *setting) flagName() string {
	if s.Name == "" {
		return ""
	}
	return "--" + s.Name
}

func lookup(name string) *setting {
	for i := range table {
		if table[i].Name != "" && table[i].Name == name {
			return &table[i]
		}
	}
	return nil
}

// Defaults is the configuration with no flags and no environment.
func Defaults() *Config {
	c := &Config{}
	for i := range table {
		s := &table[i]
		if err := s.bind(c).set(s.Default); err != nil {
			panic(fmt.Sprintf("config: default of %s: %v", s.envName(), err)) // a bad row; TestEveryTableRowParses
		}
	}
	return c
}

// Parse reads args (the command line without the program name) over the
// environment (lookupEnv, usually os.LookupEnv) over the defaults, and
// validates the result. Flags are --name value, --name=value, or the same
// with one dash; a boolean flag alone means yes, and takes a following
// yes/no word as its value (--persist no). "celld help" is --help. Any other
// word, or anything after "--", is refused (ErrStray).
//
// When c.Help or c.Version is set the rest of c may be partly read; the
// caller prints and exits.
func Parse(args []string, lookupEnv func(string) (string, bool)) (*Config, error) {
	c := Defaults()
	for i := range table {
		s := &table[i]
		v, ok := lookupEnv(s.envName())
		if !ok {
			continue
		}
		if err := s.bind(c).set(v); err != nil {
			return c, &Error{Flag: s.flagName(), Env: s.envName(), Value: v, FromEnv: true, Err: err}
		}
		c.markGiven(s)
	}
	if len(args) == 1 && args[0] == "help" {
		c.Help = true
		return c, nil
	}
	for _, a := range args {
		if a == "--" {
			break
		}
		if a == "-h" || a == "-help" || a == "--help" {
			c.Help = true // help wins over any mistake beside it
			return c, nil
		}
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			if i+1 < len(args) {
				return c, fmt.Errorf("%w %q after \"--\": celld takes only flags (see celld --help)", ErrStray, args[i+1])
			}
			break
		}
		if len(a) < 2 || a[0] != '-' {
			return c, strayError(args, i)
		}
		name := strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
		name, val, hasVal := strings.Cut(name, "=")
		var action *bool
		switch name {
		case "h", "help":
			action = &c.Help
		case "version":
			action = &c.Version
		case "healthcheck":
			action = &c.Healthcheck
		}
		if action != nil {
			if !hasVal {
				*action = true
				continue
			}
			b, err := ParseBool(val)
			if err != nil {
				return c, fmt.Errorf("--%s %q: %v", name, val, err)
			}
			*action = b
			continue
		}
		s := lookup(name)
		if s == nil {
			if name == "requirepass" {
				return c, errors.New("--requirepass is not a flag (ps would show the password): set CELLD_REQUIREPASS or --requirepass-file")
			}
			return c, fmt.Errorf("unknown flag %s (see celld --help)", a)
		}
		v := s.bind(c)
		if !hasVal {
			_, isBool := v.(boolValue)
			switch {
			case isBool:
				// A following word is this flag's value: a word is
				// never valid on its own, so "--persist maybe" is a bad
				// value for --persist, not a stray "maybe".
				val = "yes"
				if i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
					val = args[i+1]
					i++
				}
			case i+1 >= len(args) || isFlag(args[i+1]):
				return c, fmt.Errorf("--%s needs a value (%s; env %s)", s.Name, v.meta(), s.envName())
			default:
				val = args[i+1]
				i++
			}
		}
		if err := v.set(val); err != nil {
			return c, &Error{Flag: s.flagName(), Env: s.envName(), Value: val, Err: err}
		}
		c.markGiven(s)
	}
	if c.Help || c.Version {
		return c, nil
	}
	return c, c.Validate()
}

// isFlag reports whether a is a known flag (so "--addr --dir x" says --addr
// has no value instead of listening on "--dir"). "-5" is not a flag.
func isFlag(a string) bool {
	if len(a) < 2 || a[0] != '-' {
		return false
	}
	name, _, _ := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-"), "=")
	switch name {
	case "h", "help", "version", "healthcheck":
		return true
	}
	return lookup(name) != nil
}

// strayError explains args[i], a word that is neither a flag nor a flag's
// value.
func strayError(args []string, i int) error {
	hint := "celld takes only flags (see celld --help)"
	if i > 0 && strings.HasPrefix(args[i-1], "-") && strings.Contains(args[i-1], "=") {
		hint = fmt.Sprintf("%s already has its value; celld takes only flags (see celld --help)", args[i-1])
	}
	return fmt.Errorf("%w %q: %s", ErrStray, args[i], hint)
}

// Validate checks the rules that involve more than one setting. Each
// setting's own range was checked when it was read. It reads no file and
// opens no port.
func (c *Config) Validate() error {
	if c.Persist && c.Dir == "" {
		return errors.New("--dir (env CELLD_DIR) is empty while --persist is on")
	}
	if c.TLSPort != 0 && (c.TLSCert == "" || c.TLSKey == "") {
		return fmt.Errorf("--tls-port %d needs --tls-cert and --tls-key (env CELLD_TLS_CERT, CELLD_TLS_KEY)", c.TLSPort)
	}
	if c.TLSPort == 0 && (c.TLSCert != "" || c.TLSKey != "" || c.TLSCA != "") {
		return errors.New("--tls-cert, --tls-key and --tls-ca need --tls-port (env CELLD_TLS_PORT): no TLS port is served")
	}
	if !c.PlainEnabled() && c.TLSPort == 0 {
		return fmt.Errorf("--addr %q (env CELLD_ADDR) serves no plain port and --tls-port is 0: nothing to listen on", c.Addr)
	}
	if c.QueryBufferLimit != 0 && c.QueryBufferLimit < c.MaxBulk {
		return fmt.Errorf("--client-query-buffer-limit %d (env CELLD_CLIENT_QUERY_BUFFER_LIMIT) is less than --proto-max-bulk-len %d", c.QueryBufferLimit, c.MaxBulk)
	}
	if err := c.validateUpstream(); err != nil {
		return err
	}
	if c.ClusterAnnounce != "" && c.ClusterNodes == "" && c.Etcd == "" {
		return errors.New("--cluster-announce (env CELLD_CLUSTER_ANNOUNCE) needs --cluster-nodes (env CELLD_CLUSTER_NODES) or --etcd")
	}
	if err := c.validateHA(); err != nil {
		return err
	}
	return nil
}

// PlainEnabled reports whether a plain-TCP port is served: Addr is set and
// its port is not 0 (Redis's "port 0").
func (c *Config) PlainEnabled() bool {
	if c.Addr == "" {
		return false
	}
	// The port as a number: "127.0.0.1:00" is port 0 too (hostPort has
	// checked that Addr is host:port with a port from 0 to 65535).
	_, port, err := net.SplitHostPort(c.Addr)
	if err != nil {
		return !strings.HasSuffix(c.Addr, ":0")
	}
	n, err := strconv.ParseUint(port, 10, 16)
	return err != nil || n != 0
}

// TLSAddr is the TLS listen address (host of Addr, or 127.0.0.1 when Addr
// is empty, and TLSPort), or "" when TLS is off.
func (c *Config) TLSAddr() string {
	if c.TLSPort == 0 {
		return ""
	}
	host := "127.0.0.1"
	if c.Addr != "" {
		if i := strings.LastIndexByte(c.Addr, ':'); i >= 0 {
			host = c.Addr[:i]
		}
	}
	return joinHostPort(host, c.TLSPort)
}

func joinHostPort(host string, port int) string {
	if strings.Contains(host, ":") && !strings.HasPrefix(host, "[") {
		host = "[" + host + "]"
	}
	return fmt.Sprintf("%s:%d", host, port)
}

// Usage writes --help: what celld is, how to use it, every setting by group
// with its variable and default, and two examples.
func Usage(w io.Writer) {
	fmt.Fprint(w, `celld: a Redis-protocol rate limiter. It answers redis-cell's CL.THROTTLE
(GCRA) bit-for-bit, keeps limiter state on disk across restarts, and speaks
Redis Cluster; point redis-cli or any Redis client at it.

Usage: celld [flags]

Every flag can also be set by its environment variable; a flag wins over
its variable. Booleans take yes/no, true/false, on/off, 1/0. Sizes take
Redis units (512kb, 1mb). Durations are like 100ms, 10s.
`)
	for g := range numGroups {
		fmt.Fprintf(w, "\n%s:\n", g)
		for i := range table {
			s := &table[i]
			if s.Group != g {
				continue
			}
			v := s.bind(&Config{})
			head := "  " + s.envName()
			if s.Name != "" {
				head = "  --" + s.Name + " " + v.meta()
			}
			def := s.Default
			if def == "" {
				def = "''"
			}
			fmt.Fprintf(w, "%s\n      %s\n      (env %s, default %s)\n", head, s.Usage, s.envName(), def)
		}
	}
	fmt.Fprint(w, `
Actions (no environment variable):
  --help, -h, celld help   print this help and exit
  --version                print the version and exit
  --healthcheck            PING the server these settings describe (plain port,
                           else TLS port) and exit 0 if it answers, 1 if not

Examples:
  # A sidecar on loopback, state kept in ./data:
  celld --addr 127.0.0.1:6379 --dir ./data

  # In a container: all interfaces, a password, metrics and JSON logs:
  CELLD_REQUIREPASS=change-me celld --addr 0.0.0.0:6379 --dir /data \
      --metrics-addr 0.0.0.0:9121 --log-format json

Bad values, unknown flags and stray words are refused (exit 2) before
celld touches the data directory or any port. Documentation: README.md
and docs/ in celld's source tree.
`)
}

// Name is one setting as documentation lists it.
type Name struct {
	Flag    string // "--addr", or "" for a variable with no flag
	Env     string // "CELLD_ADDR"
	Default string
	Group   Group
	Meta    string // the value's placeholder in --help: N, SIZE, yes|no, ...
	Usage   string
}

// Names lists every setting in table order, for documentation and the
// tests that keep it in step.
func Names() []Name {
	out := make([]Name, len(table))
	for i := range table {
		s := &table[i]
		out[i] = Name{Flag: s.flagName(), Env: s.envName(), Default: s.Default, Group: s.Group,
			Meta: s.bind(&Config{}).meta(), Usage: s.Usage}
	}
	return out
}
