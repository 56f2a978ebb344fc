package config

import "strings"

// Given reports whether the setting named name (its flag name without
// dashes, e.g. "busy-poll") was set by a flag or an environment variable,
// rather than left at its default: for a default that depends on the mode
// (a sidecar's busy-poll is 0 unless given). Any goroutine, once Parse has
// returned.
func (c *Config) Given(name string) bool { return strings.Contains(c.given, "|"+name+"|") }

// markGiven records that s was set by a flag or the environment (Parse).
// A string, not a map, keeps Config comparable.
func (c *Config) markGiven(s *setting) {
	if !c.Given(s.Name) {
		c.given += "|" + s.Name + "|"
	}
}
