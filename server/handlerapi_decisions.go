package server

import "sync/atomic"

// Decision counters and tracking precision for registered commands (the
// handler API, handlerapi.go): a rate-limiting command registered with
// Command.Decides counts each decision with Ctx.Decided, and the counts
// join the GCRA family's in Stats.Decisions (celld_decisions_total{command}
// in the metrics); a command with Command.Modified tells client-side
// caching which of its replies show a write.

// maxDecidingCmds is how many registered commands may count decisions.
const maxDecidingCmds = 8

// deciding names the registered commands that count decisions, in
// registration order; Ctx.dec is an index into it, plus one. Written only
// by Register (init time).
var deciding []string

// extModified holds Command.Modified by command name. Written only by
// Register (init time).
var extModified = map[string]func(args [][]byte, reply []byte) bool{}

// registerDecisions records rc's decision counting and tracking hook and
// returns the Ctx.dec index for it (0: none). Init time only.
func registerDecisions(rc *Command) int {
	if rc.Modified != nil {
		extModified[rc.Name] = rc.Modified
	}
	if !rc.Decides {
		return 0
	}
	if len(deciding) == maxDecidingCmds {
		panic("server: too many registered commands count decisions; raise maxDecidingCmds")
	}
	deciding = append(deciding, rc.Name)
	return len(deciding)
}

// extDecisions counts registered commands' decisions, sharded by client id
// like familyStats. The zero value is ready.
type extDecisions struct {
	shards [statShards]struct {
		n [maxDecidingCmds][2]atomic.Int64 // [command][0 allowed, 1 denied]
	}
}

// Decided counts one rate-limit decision of the running command: allowed,
// or denied when limited. Only for commands registered with Decides (a
// no-op otherwise); call it once per decision. Cost: one atomic add on a
// counter shard chosen by client id.
func (x *Ctx) Decided(limited bool) {
	if x.dec == 0 {
		return
	}
	i := 0
	if limited {
		i = 1
	}
	x.s.extDec.shards[uint64(x.c.id)%statShards].n[x.dec-1][i].Add(1)
}

// decisions appends one Decision per registered deciding command.
func (d *extDecisions) decisions(out []Decision) []Decision {
	for k, name := range deciding {
		dc := Decision{Command: name}
		for i := range d.shards {
			dc.Allowed += d.shards[i].n[k][0].Load()
			dc.Denied += d.shards[i].n[k][1].Load()
		}
		out = append(out, dc)
	}
	return out
}
