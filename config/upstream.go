package config

import (
	"errors"
	"fmt"
	"net"
	"strings"
)

// hostPortList checks --upstream: one or more host:port, comma-separated.
func hostPortList(s string) error {
	if s == "" {
		return nil
	}
	for _, a := range strings.Split(s, ",") {
		if err := hostPort(false)(strings.TrimSpace(a)); err != nil {
			return fmt.Errorf("%q: %w", a, err)
		}
	}
	return nil
}

// UpstreamSeeds is --upstream split into its addresses.
func (c *Config) UpstreamSeeds() []string {
	if c.Upstream == "" {
		return nil
	}
	var out []string
	for _, a := range strings.Split(c.Upstream, ",") {
		out = append(out, strings.TrimSpace(a))
	}
	return out
}

// validateUpstream checks the sidecar settings against each other.
func (c *Config) validateUpstream() error {
	if c.Upstream == "" {
		if c.UpstreamTLS || c.UpstreamPasswordFile != "" || c.UpstreamTLSCA != "" || c.UpstreamTLSCert != "" || c.UpstreamTLSKey != "" {
			return errors.New("--upstream-password-file and --upstream-tls* need --upstream (env CELLD_UPSTREAM)")
		}
		return nil
	}
	if c.ClusterNodes != "" {
		return errors.New("--upstream (a sidecar) and --cluster-nodes (a cluster node) exclude each other")
	}
	if (c.UpstreamTLSCert == "") != (c.UpstreamTLSKey == "") {
		return errors.New("--upstream-tls-cert and --upstream-tls-key go together")
	}
	if !c.UpstreamTLS && (c.UpstreamTLSCA != "" || c.UpstreamTLSCert != "") {
		return errors.New("--upstream-tls-ca and --upstream-tls-cert need --upstream-tls yes")
	}
	for _, seed := range c.UpstreamSeeds() {
		if sameListener(seed, c.Addr) {
			return fmt.Errorf("--upstream %s is this server's own --addr %s: the sidecar would forward every command to itself", seed, c.Addr)
		}
	}
	return nil
}

// sameListener reports whether a connection to seed would reach the
// listener on addr: the same port and the same host (the same IP), a
// loopback or unspecified host against an unspecified one (0.0.0.0, ::,
// ""), or localhost against a loopback one (and a loopback host against
// localhost). A loopback IP against another
// loopback IP is another listener (127.0.0.1:6379 and [::1]:6379, or
// 127.0.0.2:6379, are other sockets), as the sidecar's own check has it
// (sidecar.isSelf). Other names that resolve to this host are not seen.
func sameListener(seed, addr string) bool {
	sh, sp, err1 := net.SplitHostPort(seed)
	ah, ap, err2 := net.SplitHostPort(addr)
	if err1 != nil || err2 != nil || sp != ap || ap == "0" {
		return false
	}
	if strings.EqualFold(sh, ah) {
		return true
	}
	sIP, aIP := net.ParseIP(sh), net.ParseIP(ah)
	if sIP != nil && aIP != nil && sIP.Equal(aIP) {
		return true
	}
	seedLocal := strings.EqualFold(sh, "localhost") || sh == "" || sIP != nil && (sIP.IsLoopback() || sIP.IsUnspecified())
	if ah == "" || aIP != nil && aIP.IsUnspecified() {
		return seedLocal
	}
	if strings.EqualFold(ah, "localhost") { // a loopback IP, whichever the name resolves to first
		return strings.EqualFold(sh, "localhost") || sIP != nil && sIP.IsLoopback()
	}
	return strings.EqualFold(sh, "localhost") && aIP != nil && aIP.IsLoopback()
}
