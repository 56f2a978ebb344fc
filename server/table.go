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
}

func (sp spec) build() *command {
	cmd := &command{
		name: sp.name, arity: sp.arity, firstKey: sp.first, lastKey: sp.last, step: sp.step,
		run: sp.run, immediate: sp.immediate,
		summary: sp.summary, group: sp.group, since: sp.since,
	}
	if sp.flags != "" {
		cmd.flags = strings.Fields(sp.flags)
	}
	for _, a := range strings.Fields(sp.acl) {
		cmd.acl = append(cmd.acl, "@"+a)
	}
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

		{name: "get", arity: 2, flags: ro, first: 1, last: 1, step: 1, acl: "read string fast", group: "string", since: "1.0.0",
			summary: "Returns the string value of a key.", run: cmdGet},
		{name: "set", arity: -3, flags: "write denyoom", first: 1, last: 1, step: 1, acl: "write string slow", group: "string", since: "1.0.0",
			summary: "Sets the string value of a key, ignoring its type. The key is created if it doesn't exist.", run: cmdSet},
		{name: "strlen", arity: 2, flags: ro, first: 1, last: 1, step: 1, acl: "read string fast", group: "string", since: "2.2.0",
			summary: "Returns the length of a string value.", run: cmdStrlen},
		{name: "del", arity: -2, flags: "write", first: 1, last: -1, step: 1, acl: "keyspace write slow", group: "generic", since: "1.0.0",
			summary: "Deletes one or more keys.", run: cmdDel},
		{name: "unlink", arity: -2, flags: wfast, first: 1, last: -1, step: 1, acl: "keyspace write fast", group: "generic", since: "4.0.0",
			summary: "Asynchronously deletes one or more keys.", run: cmdDel},
		{name: "exists", arity: -2, flags: ro, first: 1, last: -1, step: 1, acl: "keyspace read fast", group: "generic", since: "1.0.0",
			summary: "Determines whether one or more keys exist.", run: cmdExists},
		{name: "type", arity: 2, flags: ro, first: 1, last: 1, step: 1, acl: "keyspace read fast", group: "generic", since: "1.0.0",
			summary: "Determines the type of value stored at a key.", run: cmdType},
		{name: "ttl", arity: 2, flags: ro, first: 1, last: 1, step: 1, acl: "keyspace read fast", group: "generic", since: "1.0.0",
			summary: "Returns the expiration time in seconds of a key.", run: cmdTTL},
		{name: "pttl", arity: 2, flags: ro, first: 1, last: 1, step: 1, acl: "keyspace read fast", group: "generic", since: "2.6.0",
			summary: "Returns the expiration time in milliseconds of a key.", run: cmdPTTL},
		{name: "expiretime", arity: 2, flags: ro, first: 1, last: 1, step: 1, acl: "keyspace read fast", group: "generic", since: "7.0.0",
			summary: "Returns the expiration time of a key as a Unix timestamp.", run: cmdExpireTime},
		{name: "pexpiretime", arity: 2, flags: ro, first: 1, last: 1, step: 1, acl: "keyspace read fast", group: "generic", since: "7.0.0",
			summary: "Returns the expiration time of a key as a Unix milliseconds timestamp.", run: cmdPExpireTime},
		{name: "expire", arity: -3, flags: wfast, first: 1, last: 1, step: 1, acl: "keyspace write fast", group: "generic", since: "1.0.0",
			summary: "Sets the expiration time of a key in seconds.", run: cmdExpire},
		{name: "pexpire", arity: -3, flags: wfast, first: 1, last: 1, step: 1, acl: "keyspace write fast", group: "generic", since: "2.6.0",
			summary: "Sets the expiration time of a key in milliseconds.", run: cmdPExpire},
		{name: "expireat", arity: -3, flags: wfast, first: 1, last: 1, step: 1, acl: "keyspace write fast", group: "generic", since: "1.2.0",
			summary: "Sets the expiration time of a key to a Unix timestamp.", run: cmdExpireAt},
		{name: "pexpireat", arity: -3, flags: wfast, first: 1, last: 1, step: 1, acl: "keyspace write fast", group: "generic", since: "2.6.0",
			summary: "Sets the expiration time of a key to a Unix milliseconds timestamp.", run: cmdPExpireAt},
		{name: "persist", arity: 2, flags: wfast, first: 1, last: 1, step: 1, acl: "keyspace write fast", group: "generic", since: "2.2.0",
			summary: "Removes the expiration time of a key.", run: cmdPersist},
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
		{name: "time", arity: 1, flags: "loading stale fast", acl: "fast", group: "server", since: "2.6.0",
			summary: "Returns the server time.", run: cmdTime},

		{name: "ping", arity: -1, flags: "fast", acl: "fast connection", group: "connection", since: "1.0.0",
			summary: "Returns the server's liveliness response.", run: cmdPing},
		{name: "echo", arity: 2, flags: "fast", acl: "fast connection", group: "connection", since: "1.0.0",
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
		{name: "lastsave", arity: 1, flags: "loading stale fast", acl: "admin fast dangerous", group: "server", since: "1.0.0",
			summary: "Returns the Unix timestamp of the last successful save to disk.", run: cmdLastsave},
	}
	subs := map[string][]spec{
		"client": {
			{name: "id", arity: 2, flags: conn, acl: "slow connection", run: cmdClientID, summary: "Returns the unique client ID of the connection."},
			{name: "setname", arity: 3, flags: conn, acl: "slow connection", run: cmdClientSetName, summary: "Sets the connection name."},
			{name: "getname", arity: 2, flags: conn, acl: "slow connection", run: cmdClientGetName, summary: "Returns the name of the connection."},
			{name: "setinfo", arity: 4, flags: conn, acl: "slow connection", run: cmdClientSetInfo, summary: "Sets information specific to the client or connection."},
			{name: "info", arity: 2, flags: conn, acl: "slow connection", run: cmdClientInfo, summary: "Returns information about the connection."},
			{name: "list", arity: -2, flags: "admin noscript loading stale", acl: "admin slow dangerous connection", run: cmdClientList, summary: "Lists open connections."},
			{name: "no-evict", arity: 3, flags: "admin noscript loading stale", acl: "admin slow dangerous connection", run: cmdClientNoEvict, summary: "Sets the client eviction mode of the connection."},
			{name: "help", arity: 2, flags: "loading stale", acl: "slow connection", run: cmdClientHelp, summary: "Returns helpful text about the different subcommands."},
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
				cmd.subs[sub.name] = sub.build()
			}
		}
		commands[cmd.name] = cmd
	}
}
