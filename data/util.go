package data

import "unsafe"

// unsafeString views b as a string without copying. Only for a buffer the
// caller made and never writes again (the string keeps it alive).
func unsafeString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
