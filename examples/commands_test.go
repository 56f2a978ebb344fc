package examples

// The string and key commands (DEL, GET, ...) live in package data; the
// test server needs them registered.
import _ "github.com/celld/celld/data"
