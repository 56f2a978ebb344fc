package main

import (
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
)

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
