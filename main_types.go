package main

// The hash, list and sorted-set commands register themselves from package
// data (data/hash.go, data/list.go, data/zset.go).
import _ "github.com/celld/celld/data"
