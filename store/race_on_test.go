//go:build race

package store

// raceEnabled: the race detector slows the store ~10x; long sprays shrink.
const raceEnabled = true
