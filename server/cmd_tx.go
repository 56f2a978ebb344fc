package server

// Transactions: MULTI, EXEC, DISCARD, WATCH, UNWATCH, with Redis 7's rules:
// a command that fails to queue (unknown, wrong arity) makes EXEC answer
// EXECABORT; a watched key written by anyone since WATCH makes EXEC answer
// a null array; EXEC and DISCARD always unwatch.

func cmdMulti(s *Server, c *client, _ [][]byte) {
	if c.inMulti {
		c.out = appendError(c.out, "ERR MULTI calls can not be nested")
		return
	}
	c.inMulti = true
	c.setMultiLen(0)
	c.out = append(c.out, replyOK...)
}

func cmdDiscard(s *Server, c *client, _ [][]byte) {
	if !c.inMulti {
		c.out = appendError(c.out, "ERR DISCARD without MULTI")
		return
	}
	c.discardMulti()
	s.watch.unwatchAll(c)
	c.out = append(c.out, replyOK...)
}

func cmdExec(s *Server, c *client, _ [][]byte) {
	if !c.inMulti {
		c.out = appendError(c.out, "ERR EXEC without MULTI")
		return
	}
	queue, failed := c.queue, c.multiError
	c.discardMulti()
	if failed {
		s.watch.unwatchAll(c)
		c.out = appendError(c.out, "EXECABORT Transaction discarded because of previous errors.")
		return
	}
	s.iso.lock()
	defer s.iso.unlock()
	if s.watchedChanged(c) {
		s.watch.unwatchAll(c)
		c.out = c.appendNullArray(c.out)
		return
	}
	s.watch.unwatchAll(c)
	c.out = appendArray(c.out, len(queue))
	for _, args := range queue {
		// A check point between replies (obuf.go): many replies of
		// built-in commands (which have none of their own) never pile
		// up past the output limit; once the connection is gone they
		// are dropped, and the transaction runs on, as in Redis.
		c.replyFull()
		s.run(c, lookup(commands, args[0]), args)
	}
	c.replyFull()
}

// watchedChanged reports whether any key c watches was written since WATCH.
func (s *Server) watchedChanged(c *client) bool {
	if c.watchTouched.Load() {
		return true
	}
	nowMs := s.nowMs()
	for _, w := range c.watched {
		ver, ok := s.dbs.DB(w.db).Version([]byte(w.key), nowMs)
		if ok != w.exists || (ok && ver != w.ver) {
			return true
		}
	}
	return false
}

func cmdWatch(s *Server, c *client, args [][]byte) {
	if c.inMulti {
		c.out = appendError(c.out, "ERR WATCH inside MULTI is not allowed")
		return
	}
	nowMs := s.nowMs()
	for _, k := range args[1:] {
		dup := false
		for _, w := range c.watched {
			if w.key == string(k) && w.db == c.db {
				dup = true
				break
			}
		}
		if dup {
			continue
		}
		ver, ok := s.keyspace(c).Version(k, nowMs)
		key := string(k)
		c.watched = append(c.watched, watchedKey{key: key, db: c.db, ver: ver, exists: ok})
		s.watch.add(c, c.db, key)
	}
	c.out = append(c.out, replyOK...)
}

func cmdUnwatch(s *Server, c *client, _ [][]byte) {
	s.watch.unwatchAll(c)
	c.out = append(c.out, replyOK...)
}
