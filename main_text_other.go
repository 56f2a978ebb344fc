//go:build !linux

package main

// releaseTextPages is main_text_linux.go's; elsewhere the binary's pages
// are left as the system maps them.
func releaseTextPages() (int, error) { return 0, nil }
