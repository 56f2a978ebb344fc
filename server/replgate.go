package server

// Replication's two hooks into the command path (package repl implements
// them; main wires them through Config):
//
//   - Config.WriteGate is consulted before every command flagged "write"
//     runs (in call, so also inside EXEC and scripts): a non-nil error is
//     the command's reply ("-" + its text, e.g. TRYAGAIN while replication
//     lags, READONLY on a follower) and the command does not run.
//   - Config.ReplyBarrier is called before a connection's replies are
//     written when a write ran since they were last written (sync
//     acknowledgement: one wait per batch of replies, a group commit). An
//     error means the writes may not be replicated: the replies are
//     dropped and the connection closed unanswered, so no client is told
//     "allowed" for an admission a failover could forget.
//
// With replication off both are nil: a write pays one nil check in call
// and one bool test per batch in pump.

// replGate runs the write gate for c's command; false means it was refused
// (the error is c's reply).
func (s *Server) replGate(c *client) bool {
	if err := s.cfg.WriteGate(); err != nil {
		c.out = appendError(c.out, err.Error())
		return false
	}
	c.replWrote = true
	return true
}

// replBarrier waits for the reply barrier before c's replies go out; false
// means the connection must end without them.
func (s *Server) replBarrier(c *client) bool {
	c.replWrote = false
	if s.cfg.ReplyBarrier == nil {
		return true
	}
	if err := s.cfg.ReplyBarrier(); err != nil {
		s.log.Warn("replication: replies withheld, closing the connection", "client", c.id, "err", err)
		c.out = c.out[:0]
		c.closed = true
		return false
	}
	return true
}
