package server

import "strings"

// COMMAND INFO's flags, tips and key specs as Redis 7 reports them for the
// commands celld offers (and as Redis reports redis-cell 0.5.0's
// CL.THROTTLE, a module command registered with RedisModule_CreateCommand:
// flags "write module", no ACL categories, one legacy range key spec with
// RW access update). The dispatch table (table.go) keeps the flags in the
// order Redis's JSON files list them; these functions put them in the
// order Redis's addReplyFlagsForCommand writes them. Only COMMAND reads
// them: no hot-path cost.

// flagOrder is Redis's order of command flags in COMMAND INFO; flags not in
// it (may_replicate, sentinel, only_sentinel, protected) are hidden, as
// Redis hides them.
var flagOrder = []string{"write", "readonly", "denyoom", "module", "admin", "pubsub", "noscript", "blocking",
	"loading", "stale", "skip_monitor", "skip_slowlog", "asking", "fast", "no_auth", "no_mandatory_keys",
	"no_async_loading", "no_multi", "movablekeys", "allow_busy"}

// infoFlags returns cmd's flags as COMMAND INFO lists them: a module
// command (group "module") is flagged module, the EVAL family movablekeys.
func infoFlags(cmd *command) []string {
	var out []string
	for _, f := range flagOrder {
		switch {
		case has(cmd.flags, f),
			f == "module" && cmd.group == "module",
			f == "movablekeys" && movableKeys(cmd.name):
			out = append(out, f)
		}
	}
	return out
}

// commandTips are Redis's command tips, by full name.
var commandTips = map[string][]string{
	"command":               {"nondeterministic_output_order"},
	"command|info":          {"nondeterministic_output_order"},
	"command|docs":          {"nondeterministic_output_order"},
	"command|list":          {"nondeterministic_output_order"},
	"dbsize":                {"request_policy:all_shards", "response_policy:agg_sum"},
	"del":                   {"request_policy:multi_shard", "response_policy:agg_sum"},
	"unlink":                {"request_policy:multi_shard", "response_policy:agg_sum"},
	"exists":                {"request_policy:multi_shard", "response_policy:agg_sum"},
	"flushall":              {"request_policy:all_shards", "response_policy:all_succeeded"},
	"flushdb":               {"request_policy:all_shards", "response_policy:all_succeeded"},
	"info":                  {"nondeterministic_output", "request_policy:all_shards", "response_policy:special"},
	"keys":                  {"request_policy:all_shards", "nondeterministic_output_order"},
	"randomkey":             {"request_policy:all_shards", "nondeterministic_output"},
	"lastsave":              {"nondeterministic_output"},
	"ping":                  {"request_policy:all_shards", "response_policy:all_succeeded"},
	"ttl":                   {"nondeterministic_output"},
	"pttl":                  {"nondeterministic_output"},
	"scan":                  {"nondeterministic_output", "request_policy:special"},
	"time":                  {"nondeterministic_output"},
	"cluster|slots":         {"nondeterministic_output"},
	"cluster|shards":        {"nondeterministic_output"},
	"cluster|nodes":         {"nondeterministic_output"},
	"cluster|info":          {"nondeterministic_output"},
	"cluster|getkeysinslot": {"nondeterministic_output"},
	"client|info":           {"nondeterministic_output"},
	"client|list":           {"nondeterministic_output"},
	"config|set":            {"request_policy:all_nodes", "response_policy:all_succeeded"},
	"script|load":           {"request_policy:all_nodes", "response_policy:all_succeeded"},
	"script|exists":         {"request_policy:all_shards", "response_policy:agg_logical_and"},
	"script|flush":          {"request_policy:all_nodes", "response_policy:all_succeeded"},
	"script|kill":           {"request_policy:all_shards", "response_policy:one_succeeded"},
	"module|list":           {"nondeterministic_output_order"},
}

// keySpec is one Redis 7 key specification: begin_search by index, then
// find_keys by range (lastkey, keystep, limit) or, for the EVAL family and
// registered commands such as ZUNIONSTORE, by keynum (numkeys at keynumIdx
// after the index, keys from firstKey after it).
type keySpec struct {
	notes string
	flags []string
	index int
	// keynum: find_keys is "keynum" (keynumIdx, firstKey, keyStep).
	keynum                bool
	keynumIdx, firstKey   int
	lastKey, keyStep, lim int
}

// keySpecFlags are Redis's key-spec flags of the commands celld offers,
// where they are not what the command's write flag implies.
var keySpecFlags = map[string][]string{
	"del": {"RM", "delete"}, "unlink": {"RM", "delete"},
	"exists": {"RO"}, "strlen": {"RO"}, "type": {"RO"}, "watch": {"RO"},
	"expire": {"RW", "update"}, "pexpire": {"RW", "update"}, "expireat": {"RW", "update"},
	"pexpireat": {"RW", "update"}, "persist": {"RW", "update"},
	"set": {"RW", "access", "update", "variable_flags"},
}

// keySpecNotes are Redis's key-spec notes.
var keySpecNotes = map[string]string{
	"set":     "RW and ACCESS due to the optional `GET` argument",
	"eval":    "We cannot tell how the keys will be used so we assume the worst, RW and UPDATE",
	"eval_ro": "We cannot tell how the keys will be used so we assume the worst, RO and ACCESS",
}

// keySpecsOf returns cmd's key specs: none for a keyless command; a keynum
// spec for the EVAL family; else one range spec from the table's key
// positions, its flags RW access update for a write command (a module
// command's CMD_KEY_FULL_ACCESS, and Redis's default) or RO access.
func keySpecsOf(cmd *command) []keySpec {
	if ks, ok := registeredSpecs[cmd.fullname]; ok {
		return ks // Command.KeySpecs (handlerapi.go)
	}
	ks := keySpec{notes: keySpecNotes[cmd.name], flags: keySpecFlags[cmd.name]}
	if ks.flags == nil {
		ks.flags = []string{"RO", "access"}
		if has(cmd.flags, "write") || (movableKeys(cmd.name) && !has(cmd.flags, "readonly")) {
			ks.flags = []string{"RW", "access", "update"}
		}
	}
	switch {
	case movableKeys(cmd.name):
		ks.index, ks.keynum, ks.firstKey, ks.keyStep = 2, true, 1, 1
	case cmd.firstKey == 0:
		return nil
	default:
		ks.index, ks.keyStep = cmd.firstKey, cmd.step
		ks.lastKey = cmd.lastKey - cmd.firstKey
		if cmd.lastKey < 0 {
			ks.lastKey = cmd.lastKey
		}
	}
	return []keySpec{ks}
}

// appendKeySpecs appends cmd's key specs in COMMAND INFO's shape.
func (c *client) appendKeySpecs(b []byte, cmd *command) []byte {
	specs := keySpecsOf(cmd)
	b = appendArray(b, len(specs))
	for _, ks := range specs {
		n := 3
		if ks.notes != "" {
			n++
		}
		b = c.appendMap(b, n)
		if ks.notes != "" {
			b = appendBulkString(b, "notes")
			b = appendBulkString(b, ks.notes)
		}
		b = appendBulkString(b, "flags")
		b = c.appendSet(b, len(ks.flags))
		for _, f := range ks.flags {
			b = appendSimple(b, f)
		}
		b = appendBulkString(b, "begin_search")
		b = c.appendMap(b, 2)
		b = appendBulkString(b, "type")
		b = appendBulkString(b, "index")
		b = appendBulkString(b, "spec")
		b = c.appendMap(b, 1)
		b = appendBulkString(b, "index")
		b = appendInt(b, int64(ks.index))
		b = appendBulkString(b, "find_keys")
		b = c.appendMap(b, 2)
		b = appendBulkString(b, "type")
		if ks.keynum {
			b = appendBulkString(b, "keynum")
			b = appendBulkString(b, "spec")
			b = c.appendMap(b, 3)
			b = appendBulkString(b, "keynumidx")
			b = appendInt(b, int64(ks.keynumIdx))
			b = appendBulkString(b, "firstkey")
			b = appendInt(b, int64(ks.firstKey))
			b = appendBulkString(b, "keystep")
			b = appendInt(b, int64(ks.keyStep))
			continue
		}
		b = appendBulkString(b, "range")
		b = appendBulkString(b, "spec")
		b = c.appendMap(b, 3)
		b = appendBulkString(b, "lastkey")
		b = appendInt(b, int64(ks.lastKey))
		b = appendBulkString(b, "keystep")
		b = appendInt(b, int64(ks.keyStep))
		b = appendBulkString(b, "limit")
		b = appendInt(b, int64(ks.lim))
	}
	return b
}

// moduleOf returns the module a command belongs to ("redis-cell" for the
// module group), or "" for a core command.
func moduleOf(cmd *command) string {
	if cmd.group == "module" {
		return "redis-cell"
	}
	return ""
}

// commandKeys returns the keys of a command line (args[0] the command
// name) as COMMAND GETKEYS finds them, or Redis's error text.
func commandKeys(cmd *command, args [][]byte) ([][]byte, string) {
	if cmd.keynum != nil {
		var keys [][]byte
		cmd.keynum.each(args, false, func(k []byte) { keys = append(keys, k) })
		if len(keys) == 0 {
			return nil, "ERR Invalid arguments specified for command"
		}
		return keys, ""
	}
	first, last, step := cmd.firstKey, cmd.lastKey, cmd.step
	if movableKeys(cmd.name) {
		// A keynum spec that does not fit the arguments (numkeys 0,
		// negative, not a number, or more than the arguments) finds no
		// keys, and Redis answers an empty array, not an error.
		n, ok := parseRedisInt(args[2])
		if !ok || n <= 0 || n > int64(len(args)-3) {
			return [][]byte{}, ""
		}
		first, last, step = 3, 2+int(n), 1
	}
	if last < 0 {
		last = len(args) + last
	}
	var keys [][]byte
	for i := first; i <= last && i < len(args); i += step {
		keys = append(keys, args[i])
	}
	if len(keys) == 0 {
		return nil, "ERR Invalid arguments specified for command"
	}
	return keys, ""
}

// listName reports whether COMMAND LIST's filter keeps a command or
// subcommand (full name "parent|sub").
func listName(cmd *command, fullname, by, val string) (keep, ok bool) {
	switch strings.ToLower(by) {
	case "pattern":
		return Match(strings.ToLower(val), fullname), true
	case "aclcat":
		return has(cmd.acl, "@"+strings.ToLower(val)), true
	case "module":
		return moduleOf(cmd) != "" && strings.EqualFold(val, moduleOf(cmd)), true
	}
	return false, false
}
