package server

import "strings"

// The dispatch table. Arity, flags, key positions and ACL categories are
// Redis 7.2's (and redis-cell's for cl.throttle), because clients read them
// through COMMAND to route and to decide what is read-only.

type spec struct {
	name                  string
	arity                 int
	flags                 string // space-separated
	first, last, step     int
	acl                   string // space-separated, without '@'
	group, since, summary string
	run                   cmdFunc
	immediate             bool
	script                bool
}

func (sp spec) build() *command {
	cmd := &command{
		name: sp.name, fullname: sp.name, arity: sp.arity, firstKey: sp.first, lastKey: sp.last, step: sp.step,
		run: sp.run, immediate: sp.immediate, script: sp.script,
		summary: sp.summary, group: sp.group, since: sp.since,
	}
	if sp.flags != "" {
		cmd.flags = strings.Fields(sp.flags)
	}
	cmd.noAuth = has(cmd.flags, "no_auth")
	for _, a := range strings.Fields(sp.acl) {
		cmd.acl = append(cmd.acl, "@"+a)
	}
	cmd.initMeta() // cmdstats.go
	return cmd
}

const (
	ro     = "readonly fast"
	wfast  = "write fast"
	conn   = "noscript loading stale fast no_auth allow_busy"
	txflag = "noscript loading stale fast allow_busy"
)

func init() {
	top := []spec{
		{name: "cl.throttle", arity: -1, flags: "write", first: 1, last: 1, step: 1, group: "module", since: "0.5.0",
			summary: "Rate-limits a key with the generic cell rate algorithm (redis-cell).", run: cmdThrottle},

		{name: "keys", arity: 2, flags: "readonly", acl: "keyspace read slow dangerous", group: "generic", since: "1.0.0",
			summary: "Returns all key names that match a pattern.", run: cmdKeys},
		{name: "scan", arity: -2, flags: "readonly", acl: "keyspace read slow", group: "generic", since: "2.8.0",
			summary: "Iterates over the key names in the database.", run: cmdScan},
		{name: "dbsize", arity: 1, flags: ro, acl: "keyspace read fast", group: "server", since: "1.0.0",
			summary: "Returns the number of keys in the database.", run: cmdDBSize},
		{name: "flushdb", arity: -1, flags: "write", acl: "keyspace write slow dangerous", group: "server", since: "1.0.0",
			summary: "Remove all keys from the current database.", run: cmdFlush},
		{name: "flushall", arity: -1, flags: "write", acl: "keyspace write slow dangerous", group: "server", since: "1.0.0",
			summary: "Removes all keys from all databases.", run: cmdFlush},
		{name: "swapdb", arity: 3, flags: wfast, acl: "keyspace write fast dangerous", group: "server", since: "4.0.0",
			summary: "Swaps two Redis databases.", run: cmdSwapDB}, // databases.go
		{name: "move", arity: 3, flags: wfast, first: 1, last: 1, step: 1, acl: "keyspace write fast", group: "generic", since: "1.0.0",
			summary: "Moves a key to another database.", run: cmdMove},
		{name: "randomkey", arity: 1, flags: "readonly", acl: "keyspace read slow", group: "generic", since: "1.0.0",
			summary: "Returns a random key name from the database.", run: cmdRandomKey},
		{name: "time", arity: 1, flags: "loading stale fast", acl: "fast", group: "server", since: "2.6.0",
			summary: "Returns the server time.", run: cmdTime},

		{name: "ping", arity: -1, flags: "fast", acl: "fast connection", group: "connection", since: "1.0.0",
			summary: "Returns the server's liveliness response.", run: cmdPing},
		{name: "echo", arity: 2, flags: "loading stale fast", acl: "fast connection", group: "connection", since: "1.0.0",
			summary: "Returns the given string.", run: cmdEcho},
		{name: "quit", arity: -1, flags: conn, acl: "fast connection", group: "connection", since: "1.0.0",
			summary: "Closes the connection.", run: cmdQuit, immediate: true},
		{name: "select", arity: 2, flags: "loading stale fast", acl: "fast connection", group: "connection", since: "1.0.0",
			summary: "Changes the selected database.", run: cmdSelect},
		{name: "hello", arity: -1, flags: conn, acl: "fast connection", group: "connection", since: "6.0.0",
			summary: "Handshakes with the Redis server.", run: cmdHello},
		{name: "auth", arity: -2, flags: conn, acl: "fast connection", group: "connection", since: "1.0.0",
			summary: "Authenticates the connection.", run: cmdAuth},
		{name: "reset", arity: 1, flags: conn, acl: "fast connection", group: "connection", since: "6.2.0",
			summary: "Resets the connection.", run: cmdReset, immediate: true},
		{name: "client", arity: -2, acl: "slow", group: "connection", since: "2.4.0",
			summary: "A container for client connection commands.", run: cmdClient},

		{name: "multi", arity: 1, flags: txflag, acl: "fast transaction", group: "transactions", since: "1.2.0",
			summary: "Starts a transaction.", run: cmdMulti, immediate: true},
		{name: "exec", arity: 1, flags: "noscript loading stale skip_slowlog", acl: "slow transaction", group: "transactions", since: "1.2.0",
			summary: "Executes all commands in a transaction.", run: cmdExec, immediate: true},
		{name: "discard", arity: 1, flags: txflag, acl: "fast transaction", group: "transactions", since: "2.0.0",
			summary: "Discards a transaction.", run: cmdDiscard, immediate: true},
		{name: "watch", arity: -2, flags: txflag, first: 1, last: -1, step: 1, acl: "fast transaction", group: "transactions", since: "2.2.0",
			summary: "Monitors changes to keys to determine the execution of a transaction.", run: cmdWatch, immediate: true},
		{name: "unwatch", arity: 1, flags: txflag, acl: "fast transaction", group: "transactions", since: "2.2.0",
			summary: "Forgets about watched keys of a transaction.", run: cmdUnwatch},

		{name: "command", arity: -1, flags: "loading stale", acl: "slow connection", group: "server", since: "2.8.13",
			summary: "Returns detailed information about all commands.", run: cmdCommand},
		{name: "info", arity: -1, flags: "loading stale", acl: "slow dangerous", group: "server", since: "1.0.0",
			summary: "Returns information and statistics about the server.", run: cmdInfo},
		{name: "config", arity: -2, acl: "slow", group: "server", since: "2.0.0",
			summary: "A container for server configuration commands.", run: cmdConfig},
		{name: "module", arity: -2, acl: "slow", group: "server", since: "4.0.0",
			summary: "A container for module commands.", run: cmdModule},
		{name: "save", arity: 1, flags: "admin noscript no_async_loading no_multi", acl: "admin slow dangerous", group: "server", since: "1.0.0",
			summary: "Synchronously saves the database(s) to disk.", run: cmdSave},
		{name: "bgsave", arity: -1, flags: "admin noscript no_async_loading", acl: "admin slow dangerous", group: "server", since: "1.0.0",
			summary: "Asynchronously saves the database(s) to disk.", run: cmdBgsave},
		{name: "shutdown", arity: -1, flags: "admin noscript loading stale no_multi allow_busy", acl: "admin slow dangerous", group: "server", since: "1.0.0",
			summary: "Synchronously saves the database(s) to disk and shuts down the Redis server.", run: cmdShutdown, immediate: true},
		{name: "lastsave", arity: 1, flags: "loading stale fast", acl: "admin fast dangerous", group: "server", since: "1.0.0",
			summary: "Returns the Unix timestamp of the last successful save to disk.", run: cmdLastsave},

		{name: "eval", arity: -3, flags: "noscript skip_monitor may_replicate no_mandatory_keys stale", acl: "slow scripting", group: "scripting", since: "2.6.0",
			summary: "Executes a server-side Lua script.", run: cmdEval, script: true},
		{name: "evalsha", arity: -3, flags: "noscript skip_monitor may_replicate no_mandatory_keys stale", acl: "slow scripting", group: "scripting", since: "2.6.0",
			summary: "Executes a server-side Lua script by SHA1 digest.", run: cmdEvalSha, script: true},
		{name: "eval_ro", arity: -3, flags: "noscript skip_monitor no_mandatory_keys stale readonly", acl: "slow scripting", group: "scripting", since: "7.0.0",
			summary: "Executes a read-only server-side Lua script.", run: cmdEvalRO, script: true},
		{name: "evalsha_ro", arity: -3, flags: "noscript skip_monitor no_mandatory_keys stale readonly", acl: "slow scripting", group: "scripting", since: "7.0.0",
			summary: "Executes a read-only server-side Lua script by SHA1 digest.", run: cmdEvalShaRO, script: true},
		{name: "script", arity: -2, acl: "slow", group: "scripting", since: "2.6.0",
			summary: "A container for Lua scripts management commands.", run: cmdScript},

		{name: "cluster", arity: -2, acl: "slow", group: "cluster", since: "3.0.0",
			summary: "A container for Redis Cluster commands.", run: cmdCluster},
		{name: "readonly", arity: 1, flags: "loading stale fast", acl: "fast connection", group: "cluster", since: "3.0.0",
			summary: "Enables read-only queries for a connection to a Redis Cluster replica node.", run: clusterOnly(cmdReadonly)},
		{name: "readwrite", arity: 1, flags: "loading stale fast", acl: "fast connection", group: "cluster", since: "3.0.0",
			summary: "Enables read-write queries for a connection to a Reids Cluster replica node.", run: clusterOnly(cmdReadwrite)}, // sic: Redis 7.2's text
		{name: "asking", arity: 1, flags: "fast", acl: "fast connection", group: "cluster", since: "3.0.0",
			summary: "Signals that a cluster client is following an -ASK redirect.", run: clusterOnly(cmdClusterOK)},
	}
	top = append(top, familySpecs...) // CL.PTHROTTLE, CL.MTHROTTLE, ... (cmd_gcra_family.go)
	subs := map[string][]spec{
		"cluster": {
			{name: "slots", arity: 2, flags: "stale", acl: "slow", run: clusterOnly(cmdClusterSlots), summary: "Returns the mapping of cluster slots to nodes."},
			{name: "shards", arity: 2, flags: "stale", acl: "slow", run: clusterOnly(cmdClusterShards), summary: "Returns the mapping of cluster slots to shards."},
			{name: "nodes", arity: 2, flags: "stale", acl: "slow", run: clusterOnly(cmdClusterNodes), summary: "Returns the cluster configuration for a node."},
			{name: "info", arity: 2, flags: "stale", acl: "slow", run: clusterOnly(cmdClusterInfo), summary: "Returns information about the state of a node."},
			{name: "myid", arity: 2, flags: "stale", acl: "slow", run: clusterOnly(cmdClusterMyID), summary: "Returns the ID of a node."},
			{name: "keyslot", arity: 3, flags: "stale", acl: "slow", run: clusterOnly(cmdClusterKeySlot), summary: "Returns the hash slot for a key."},
			{name: "countkeysinslot", arity: 3, flags: "stale", acl: "slow", run: clusterOnly(cmdClusterCountKeysInSlot), summary: "Returns the number of keys in a hash slot."},
			{name: "getkeysinslot", arity: 4, flags: "stale", acl: "slow", run: clusterOnly(cmdClusterGetKeysInSlot), summary: "Returns the key names in a hash slot."},
			{name: "help", arity: 2, flags: "loading stale", acl: "slow", run: clusterOnly(cmdClusterHelp), summary: "Returns helpful text about the different subcommands."},
		},
		"client": {
			{name: "id", arity: 2, flags: "noscript loading stale", acl: "slow connection", run: cmdClientID, summary: "Returns the unique client ID of the connection."},
			{name: "setname", arity: 3, flags: "noscript loading stale", acl: "slow connection", run: cmdClientSetName, summary: "Sets the connection name."},
			{name: "getname", arity: 2, flags: "noscript loading stale", acl: "slow connection", run: cmdClientGetName, summary: "Returns the name of the connection."},
			{name: "setinfo", arity: 4, flags: "noscript loading stale", acl: "slow connection", run: cmdClientSetInfo, summary: "Sets information specific to the client or connection."},
			{name: "info", arity: 2, flags: "noscript loading stale", acl: "slow connection", run: cmdClientInfo, summary: "Returns information about the connection."},
			{name: "list", arity: -2, flags: "admin noscript loading stale", acl: "admin slow dangerous connection", run: cmdClientList, summary: "Lists open connections."},
			{name: "no-evict", arity: 3, flags: "admin noscript loading stale", acl: "admin slow dangerous connection", run: cmdClientNoEvict, summary: "Sets the client eviction mode of the connection."},
			{name: "help", arity: 2, flags: "loading stale", acl: "slow connection", run: cmdClientHelp, summary: "Returns helpful text about the different subcommands."},
			// Client-side caching (tracking.go).
			{name: "tracking", arity: -3, flags: "noscript loading stale", acl: "slow connection", run: cmdClientTracking, summary: "Controls server-assisted client-side caching for the connection."},
			{name: "caching", arity: 3, flags: "noscript loading stale", acl: "slow connection", run: cmdClientCaching, summary: "Instructs the server whether to track the keys in the next request."},
			{name: "getredir", arity: 2, flags: "noscript loading stale", acl: "slow connection", run: cmdClientGetRedir, summary: "Returns the client ID to which the connection's tracking notifications are redirected."},
			{name: "trackinginfo", arity: 2, flags: "noscript loading stale", acl: "slow connection", run: cmdClientTrackingInfo, summary: "Returns information about server-assisted client-side caching for the connection."},
		},
		"command": {
			{name: "count", arity: 2, flags: "loading stale", acl: "slow connection", run: cmdCommandCount, summary: "Returns a count of commands."},
			{name: "info", arity: -2, flags: "loading stale", acl: "slow connection", run: cmdCommandInfo, summary: "Returns information about one, multiple or all commands."},
			{name: "docs", arity: -2, flags: "loading stale", acl: "slow connection", run: cmdCommandDocs, summary: "Returns documentary information about one, multiple or all commands."},
			{name: "list", arity: -2, flags: "loading stale", acl: "slow connection", run: cmdCommandList, summary: "Returns a list of command names."},
			{name: "getkeys", arity: -3, flags: "loading stale", acl: "slow connection", run: cmdCommandGetKeys, summary: "Extracts the key names from an arbitrary command."},
		},
		"config": {
			{name: "get", arity: -3, flags: "admin noscript loading stale", acl: "admin slow dangerous", run: cmdConfigGet, summary: "Returns the effective values of configuration parameters."},
			{name: "set", arity: -4, flags: "admin noscript loading stale", acl: "admin slow dangerous", run: cmdConfigSet, summary: "Sets configuration parameters in-flight."},
			{name: "resetstat", arity: 2, flags: "admin noscript loading stale", acl: "admin slow dangerous", run: cmdConfigResetStat, summary: "Resets the server's statistics."},
		},
		"script": {
			{name: "load", arity: 3, flags: "noscript stale", acl: "slow scripting", run: cmdScriptLoad, summary: "Loads a server-side Lua script to the script cache."},
			{name: "exists", arity: -3, flags: "noscript", acl: "slow scripting", run: cmdScriptExists, summary: "Determines whether server-side Lua scripts exist in the script cache."},
			{name: "flush", arity: -2, flags: "noscript", acl: "slow scripting", run: cmdScriptFlush, summary: "Removes all server-side Lua scripts from the script cache."},
			{name: "kill", arity: 2, flags: "noscript allow_busy", acl: "slow scripting", run: cmdScriptKill, summary: "Terminates a server-side Lua script during execution."},
			{name: "help", arity: 2, flags: "loading stale", acl: "slow scripting", run: cmdScriptHelp, summary: "Returns helpful text about the different subcommands."},
		},
		"module": {
			{name: "list", arity: 2, flags: "admin noscript", acl: "admin slow dangerous", run: cmdModuleList, summary: "Returns all loaded modules."},
			{name: "load", arity: -3, flags: "admin noscript no_async_loading", acl: "admin slow dangerous", run: cmdModuleLoad, summary: "Loads a module."},
			{name: "unload", arity: 3, flags: "admin noscript no_async_loading", acl: "admin slow dangerous", run: cmdModuleLoad, summary: "Unloads a module."},
		},
	}
	commands = make(map[string]*command, len(top))
	for _, sp := range top {
		cmd := sp.build()
		if list, ok := subs[sp.name]; ok {
			cmd.subs = make(map[string]*command, len(list))
			for _, sub := range list {
				sub.group, sub.since = sp.group, sp.since
				built := sub.build()
				built.fullname = sp.name + "|" + sub.name
				cmd.subs[sub.name] = built
			}
		}
		commands[cmd.name] = cmd
	}
}
