package server

import (
	"context"
	"time"
)

// Commands in flight across a topology change (issue #26, the slot move's
// seal). A keyed command is routed by the topology dispatch loads for it
// (clusterRoute), then runs and writes the store. When the topology stops
// giving this node some slots, a command routed by the older one may still
// be between its check and its store write; a slot move's source must not
// end its stream before that write (the target would never see it, and
// could grant that admission again). WaitRouted is that wait, exact: no
// margin of time is involved.
//
// How: in cluster mode each client's routeSeq is odd while runBatch runs
// commands (entered before the first command's routing check, left after
// the last one's store write, and left around any socket write inside the
// batch, so a client that does not read its replies holds nobody up).
// Atomics are sequentially consistent: a batch that entered after
// WaitRouted read its client's routeSeq loads a topology stored before
// that read, so only the batches seen odd can hold an older topology.
//
// Cost: standalone, nothing (runBatch's existing topology nil check). In
// cluster mode two atomic adds per batch, on the client's own cache line.

// routeEnter marks c's batch in flight (cluster mode only). Only c's
// goroutine calls routeEnter and routeLeave.
func (c *client) routeEnter() { c.routeSeq.Add(1) }

// routeLeave marks it finished, if it is in flight.
func (c *client) routeLeave() {
	if c.routeSeq.Load()&1 != 0 {
		c.routeSeq.Add(1)
	}
}

// routePoll is how often WaitRouted looks again at a batch still running.
const routePoll = 100 * time.Microsecond

// WaitRouted returns once every batch of commands that may have been
// routed by a topology older than the one SetTopology last stored has
// finished (its store writes made and logged), or with ctx's error. A
// caller that saw the new topology (Topology) before calling is therefore
// sure that every later write to the slots it no longer owns is refused.
// Safe from any goroutine; O(clients) under the clients' lock once, then
// a poll per batch in flight (each finishes within its commands' own
// time: a batch never waits on its socket while marked).
func (s *Server) WaitRouted(ctx context.Context) error {
	type inFlight struct {
		c   *client
		seq uint32
	}
	var busy []inFlight
	s.mu.Lock()
	for _, c := range s.clients {
		if q := c.routeSeq.Load(); q&1 != 0 {
			busy = append(busy, inFlight{c, q})
		}
	}
	s.mu.Unlock()
	for _, b := range busy {
		for b.c.routeSeq.Load() == b.seq {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(routePoll):
			}
		}
	}
	return nil
}
