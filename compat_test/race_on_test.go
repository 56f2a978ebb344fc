//go:build race

package compat_test

// raceEnabled: the race detector slows the server ~5-10x; tests that build
// million-element values run their cheapest part only.
const raceEnabled = true
