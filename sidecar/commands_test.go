package sidecar

// The string and key commands (GET, SET, DEL, ...) live in package data;
// the test servers need them registered.
import _ "github.com/celld/celld/data"
