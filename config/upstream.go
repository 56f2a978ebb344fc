package config

import (
	"errors"
	"fmt"
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
	return nil
}
