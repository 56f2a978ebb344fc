package guard

// MaxClients returns the MaxClients option the listener enforces (0: no
// limit), for INFO's maxclients.
func (l *Listener) MaxClients() int { return l.opt.maxClients }
