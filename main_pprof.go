package main

import (
	"flag"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
)

// registerPprofFlags adds --pprof-addr: Go's runtime profiles (CPU, heap,
// goroutines, mutex) over HTTP, off by default. Only for operators chasing a
// performance problem; never expose it beyond loopback.
func registerPprofFlags(fs *flag.FlagSet, addr *string) {
	fs.StringVar(addr, "pprof-addr", envOr("CELLD_PPROF_ADDR", ""),
		"serve Go's /debug/pprof/ profiles over HTTP on this address (e.g. 127.0.0.1:6060); empty = off (env CELLD_PPROF_ADDR)")
}

// startPprof serves net/http/pprof on addr in the background. It returns
// the listener (nil when addr is empty) so the caller can close it.
func startPprof(addr string, log *slog.Logger) (net.Listener, error) {
	if addr == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	go func() { _ = http.Serve(ln, mux) }()
	log.Info("pprof listening", "addr", ln.Addr().String(), "path", "/debug/pprof/")
	return ln, nil
}
