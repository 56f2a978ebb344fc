package sidecar

import (
	"errors"
	"net"
	"strconv"
	"time"
)

// Never forwarding to itself. A sidecar whose topology names its own
// listening address (its address given to the cluster as a node's, a
// hostile or broken upstream), or that a MOVED/ASK sends there, would
// forward to itself: the request comes back in on its own port as a new
// client's, is forwarded again, and so on until the timeout; a MOVED to
// itself made a fresh key's first CL.THROTTLE come back denied. The
// server tells the sidecar where it listens (server.ForwardListener);
// an owner at one of those addresses is marked self: its breaker stays
// down (never probed), so its keys get the fallback at once, on the
// paths every down owner takes (no cost on the forwarding path), and the
// fallback's error names the loop.
//
// Self-detection compares IP literals and ports: an address is self when
// its port is one the server listens on and its host is that listener's
// IP, "localhost" or a loopback IP for a listener on a loopback IP or on
// every address, or any IP of this host's interfaces for a listener on
// every address (0.0.0.0, ::). Host names are not resolved (a DNS lookup
// per new owner, and names that resolve differently over time): a
// topology naming this sidecar by a host name is not recognised.

// listenAddr is one address the server listens on.
type listenAddr struct {
	ip   net.IP // nil or unspecified: every address
	port int
}

// selfInfo is what isSelf compares with: the listeners, and this host's
// interface addresses (read once, when a listener on every address is
// added).
type selfInfo struct {
	lns   []listenAddr
	local []net.IP
}

// errSelf is a self owner's breaker error.
var errSelf = errors.New("sidecar: owner is this sidecar's own address")

// ListeningOn implements server.ForwardListener: addr is an address the
// server listens on. The owners already known at it are marked self.
// Any goroutine; a lock and a pass over the owners.
func (s *Sidecar) ListeningOn(addr net.Addr) {
	ta, ok := addr.(*net.TCPAddr)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.self.Load()
	n := &selfInfo{}
	if old != nil {
		n.lns, n.local = append(n.lns, old.lns...), old.local
	}
	la := listenAddr{ip: ta.IP, port: ta.Port}
	for _, x := range n.lns {
		if x.port == la.port && x.ip.Equal(la.ip) {
			return
		}
	}
	n.lns = append(n.lns, la)
	if (la.ip == nil || la.ip.IsUnspecified()) && n.local == nil {
		if addrs, err := net.InterfaceAddrs(); err == nil {
			for _, a := range addrs {
				if ipn, ok := a.(*net.IPNet); ok {
					n.local = append(n.local, ipn.IP)
				}
			}
		}
	}
	s.self.Store(n)
	for _, o := range s.owners {
		if s.isSelf(o.addr) {
			s.markSelf(o)
		}
	}
}

// isSelf reports whether addr (host:port, as a topology or a redirect
// names an owner) is one the server listens on (see above).
func (s *Sidecar) isSelf(addr string) bool {
	si := s.self.Load()
	if si == nil {
		return false
	}
	host, ps, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	port, err := strconv.Atoi(ps)
	if err != nil {
		return false
	}
	var ip net.IP
	if host == "localhost" {
		ip = net.IPv4(127, 0, 0, 1)
	} else if ip = net.ParseIP(host); ip == nil {
		return false // a host name: not resolved
	}
	for _, la := range si.lns {
		if la.port != port {
			continue
		}
		every := la.ip == nil || la.ip.IsUnspecified()
		switch {
		case ip.Equal(la.ip):
			return true
		case (ip.IsLoopback() || ip.IsUnspecified()) && (every || (la.ip.IsLoopback() && host == "localhost")):
			return true
		case every:
			for _, l := range si.local {
				if ip.Equal(l) {
					return true
				}
			}
		}
	}
	return false
}

// markSelf takes o, at one of the server's own addresses, down for good:
// its keys get the fallback (session.fallback names the loop) and it is
// never probed. s.mu held.
func (s *Sidecar) markSelf(o *owner) {
	if o.self.Swap(true) {
		return
	}
	o.br.fail(time.Now(), errSelf)
	o.gen.Add(1)
	o.closeConns(true)
	s.log.Warn("upstream owner is this sidecar's own address: its keys are decided by the fallback, never forwarded to itself",
		"owner", o.addr, "fallback", s.cfg.Fallback.String())
}
