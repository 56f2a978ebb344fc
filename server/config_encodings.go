package server

import (
	"errors"
	"strconv"
)

// Redis's compact-encoding thresholds (listpack/ziplist sizes). celld keeps
// hashes, lists and sorted sets in one encoding each (kinds/), so these
// change nothing; CONFIG SET accepts them, with Redis's integer check, so
// that code and test suites that tune them run unchanged, and CONFIG GET
// reports Redis 7's defaults.
var encodingParams = [][2]string{
	{"hash-max-listpack-entries", "512"}, {"hash-max-listpack-value", "64"},
	{"hash-max-ziplist-entries", "512"}, {"hash-max-ziplist-value", "64"},
	{"list-max-listpack-size", "-2"}, {"list-max-ziplist-size", "-2"}, {"list-compress-depth", "0"},
	{"zset-max-listpack-entries", "128"}, {"zset-max-listpack-value", "64"},
	{"zset-max-ziplist-entries", "128"}, {"zset-max-ziplist-value", "64"},
}

// encodingParam reports whether name (lower case) is one of them, or
// "save", whose only value celld takes is "" (no RDB snapshots: what
// CONFIG GET save reports; test suites set it so).
func encodingParam(name string) bool {
	if name == "save" {
		return true
	}
	for _, p := range encodingParams {
		if p[0] == name {
			return true
		}
	}
	return false
}

// checkEncodingValue is Redis's check of such a value: an integer.
func checkEncodingValue(name, v string) error {
	if name == "save" {
		if v != "" {
			return errors.New("celld writes no RDB snapshots; its persistence is --dir (docs/durability.md)")
		}
		return nil
	}
	if _, err := strconv.ParseInt(v, 10, 64); err != nil {
		return errors.New("argument couldn't be parsed into an integer")
	}
	return nil
}
