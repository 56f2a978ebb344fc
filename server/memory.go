package server

import (
	"errors"
	"strconv"
	"strings"

	"github.com/celld/celld/store"
)

// The memory bound as the protocol shows it: the OOM reply, CONFIG GET/SET
// of maxmemory and maxmemory-policy, and INFO's fields. The bound itself,
// the accounting and the eviction choice are the store's (store/evict.go).
// dispatch refuses a denyoom command over the bound before it runs (as
// Redis's processCommand), scriptHost.Call a script's denyoom command (as
// scriptVerifyOOM); handlers turn store.ErrOOM (a CL.THROTTLE that would
// create a key) into Redis's reply.

// errOOM is Redis's reply to a command refused at the memory bound.
const errOOM = "OOM command not allowed when used memory > 'maxmemory'."

// overMemory reports whether used memory is over the bound and one chunk
// of evictions by the policy freed nothing (store.MakeRoom: the refusal
// Redis's processCommand gives a command queued in MULTI on EVICT_FAIL).
// One atomic load when no bound is set, seven under the bound (the clock is
// read only when over it).
func (s *Server) overMemory() bool {
	if !s.store.OverLimit() {
		return false
	}
	return s.store.MakeRoom(s.nowMs()) != nil
}

// memoryConfigParams are the CONFIG parameters the store holds, with
// their current values.
func (s *Server) memoryConfigParams() [][2]string {
	return [][2]string{
		{"maxmemory", strconv.FormatInt(s.store.MaxMemory(), 10)},
		{"maxmemory-policy", s.store.Policy().String()},
	}
}

// errUnknownConfig is CONFIG SET's reply for a parameter it does not set.
func errUnknownConfig(name []byte) string {
	return "ERR Unknown option or number of arguments for CONFIG SET - '" + string(cString(name)) + "'"
}

// cmdConfigSet is CONFIG SET parameter value [parameter value ...] for the
// parameters celld can change at run time (maxmemory, maxmemory-policy).
// As in Redis 7 it is all or nothing: every pair is checked before any is
// applied, with Redis's error texts.
func cmdConfigSet(s *Server, c *client, args [][]byte) {
	pairs := args[2:]
	if len(pairs)%2 != 0 {
		c.out = appendError(c.out, errSyntax)
		return
	}
	var (
		maxMem         int64
		policy         store.Policy
		setMax, setPol bool
		shadow         string // decisions.go
		setShadow      bool
	)
	for i := 0; i < len(pairs); i += 2 {
		name := strings.ToLower(string(pairs[i]))
		val := string(pairs[i+1])
		var err error
		dup := false
		switch name {
		case "maxmemory":
			dup, setMax = setMax, true
			maxMem, err = store.ParseMemory(val)
		case "maxmemory-policy":
			dup, setPol = setPol, true
			policy, err = store.ParsePolicy(val)
		case "shadow":
			dup, setShadow = setShadow, true
			shadow = val
		default:
			if encodingParam(name) { // accepted, no effect: config_encodings.go
				err = checkEncodingValue(name, val)
				break
			}
			c.out = appendError(c.out, errUnknownConfig(pairs[i]))
			return
		}
		if dup {
			err = errors.New("duplicate parameter")
		}
		if err != nil {
			c.out = appendError(c.out, "ERR CONFIG SET failed (possibly related to argument '"+name+"') - "+err.Error())
			return
		}
	}
	if setPol {
		s.store.SetPolicy(policy)
	}
	if setShadow {
		s.dec.setShadow(shadow)
	}
	if setMax {
		if used := s.store.UsedMemory(); maxMem > 0 && used > maxMem {
			s.log.Warn("CONFIG SET maxmemory is below the memory in use: keys are evicted by the policy (or new keys refused under noeviction)",
				"maxmemory", maxMem, "used_memory", used, "policy", s.store.Policy().String())
		}
		s.store.SetMaxMemory(maxMem)
	}
	c.out = append(c.out, replyOK...)
}

// infoMemoryBound is INFO memory's maxmemory lines.
func (s *Server) infoMemoryBound() []string {
	m := s.store.MaxMemory()
	return []string{
		"maxmemory:" + strconv.FormatInt(m, 10),
		"maxmemory_human:" + bytesToHuman(uint64(m)),
		"maxmemory_policy:" + s.store.Policy().String(),
	}
}
