package data

import "github.com/celld/celld/server"

// Redis 7.0's COMMAND INFO key specifications and command tips of the
// hash, list and sorted-set commands, by name (copied from redis-server
// 7.0.15's COMMAND INFO; TestRedisDiffCommandInfo compares them with it).
// register attaches them; read only at init.

// cmdMeta is one command's key specs and tips.
type cmdMeta struct {
	specs []server.KeySpec
	tips  []string
}

var typeCmdMeta = map[string]cmdMeta{
	"hdel":             {specs: []server.KeySpec{{Flags: "RW delete", Index: 1, KeyStep: 1}}},
	"hexists":          {specs: []server.KeySpec{{Flags: "RO", Index: 1, KeyStep: 1}}},
	"hget":             {specs: []server.KeySpec{{Flags: "RO access", Index: 1, KeyStep: 1}}},
	"hgetall":          {specs: []server.KeySpec{{Flags: "RO access", Index: 1, KeyStep: 1}}, tips: []string{"nondeterministic_output_order"}},
	"hincrby":          {specs: []server.KeySpec{{Flags: "RW access update", Index: 1, KeyStep: 1}}},
	"hincrbyfloat":     {specs: []server.KeySpec{{Flags: "RW access update", Index: 1, KeyStep: 1}}},
	"hkeys":            {specs: []server.KeySpec{{Flags: "RO access", Index: 1, KeyStep: 1}}, tips: []string{"nondeterministic_output_order"}},
	"hlen":             {specs: []server.KeySpec{{Flags: "RO", Index: 1, KeyStep: 1}}},
	"hmget":            {specs: []server.KeySpec{{Flags: "RO access", Index: 1, KeyStep: 1}}},
	"hmset":            {specs: []server.KeySpec{{Flags: "RW update", Index: 1, KeyStep: 1}}},
	"hrandfield":       {specs: []server.KeySpec{{Flags: "RO access", Index: 1, KeyStep: 1}}, tips: []string{"nondeterministic_output"}},
	"hscan":            {specs: []server.KeySpec{{Flags: "RO access", Index: 1, KeyStep: 1}}, tips: []string{"nondeterministic_output"}},
	"hset":             {specs: []server.KeySpec{{Flags: "RW update", Index: 1, KeyStep: 1}}},
	"hsetnx":           {specs: []server.KeySpec{{Flags: "RW insert", Index: 1, KeyStep: 1}}},
	"hstrlen":          {specs: []server.KeySpec{{Flags: "RO", Index: 1, KeyStep: 1}}},
	"hvals":            {specs: []server.KeySpec{{Flags: "RO access", Index: 1, KeyStep: 1}}, tips: []string{"nondeterministic_output_order"}},
	"lindex":           {specs: []server.KeySpec{{Flags: "RO access", Index: 1, KeyStep: 1}}},
	"linsert":          {specs: []server.KeySpec{{Flags: "RW insert", Index: 1, KeyStep: 1}}},
	"llen":             {specs: []server.KeySpec{{Flags: "RO", Index: 1, KeyStep: 1}}},
	"lmove":            {specs: []server.KeySpec{{Flags: "RW access delete", Index: 1, KeyStep: 1}, {Flags: "RW insert", Index: 2, KeyStep: 1}}},
	"lmpop":            {specs: []server.KeySpec{{Flags: "RW access delete", Index: 1, KeyNum: true, FirstKey: 1, KeyStep: 1}}},
	"lpop":             {specs: []server.KeySpec{{Flags: "RW access delete", Index: 1, KeyStep: 1}}},
	"lpos":             {specs: []server.KeySpec{{Flags: "RO access", Index: 1, KeyStep: 1}}},
	"lpush":            {specs: []server.KeySpec{{Flags: "RW insert", Index: 1, KeyStep: 1}}},
	"lpushx":           {specs: []server.KeySpec{{Flags: "RW insert", Index: 1, KeyStep: 1}}},
	"lrange":           {specs: []server.KeySpec{{Flags: "RO access", Index: 1, KeyStep: 1}}},
	"lrem":             {specs: []server.KeySpec{{Flags: "RW delete", Index: 1, KeyStep: 1}}},
	"lset":             {specs: []server.KeySpec{{Flags: "RW update", Index: 1, KeyStep: 1}}},
	"ltrim":            {specs: []server.KeySpec{{Flags: "RW delete", Index: 1, KeyStep: 1}}},
	"rpop":             {specs: []server.KeySpec{{Flags: "RW access delete", Index: 1, KeyStep: 1}}},
	"rpoplpush":        {specs: []server.KeySpec{{Flags: "RW access delete", Index: 1, KeyStep: 1}, {Flags: "RW insert", Index: 2, KeyStep: 1}}},
	"rpush":            {specs: []server.KeySpec{{Flags: "RW insert", Index: 1, KeyStep: 1}}},
	"rpushx":           {specs: []server.KeySpec{{Flags: "RW insert", Index: 1, KeyStep: 1}}},
	"zadd":             {specs: []server.KeySpec{{Flags: "RW update", Index: 1, KeyStep: 1}}},
	"zcard":            {specs: []server.KeySpec{{Flags: "RO", Index: 1, KeyStep: 1}}},
	"zcount":           {specs: []server.KeySpec{{Flags: "RO access", Index: 1, KeyStep: 1}}},
	"zdiff":            {specs: []server.KeySpec{{Flags: "RO access", Index: 1, KeyNum: true, FirstKey: 1, KeyStep: 1}}},
	"zdiffstore":       {specs: []server.KeySpec{{Flags: "OW update", Index: 1, KeyStep: 1}, {Flags: "RO access", Index: 2, KeyNum: true, FirstKey: 1, KeyStep: 1}}},
	"zincrby":          {specs: []server.KeySpec{{Flags: "RW access update", Index: 1, KeyStep: 1}}},
	"zinter":           {specs: []server.KeySpec{{Flags: "RO access", Index: 1, KeyNum: true, FirstKey: 1, KeyStep: 1}}},
	"zintercard":       {specs: []server.KeySpec{{Flags: "RO access", Index: 1, KeyNum: true, FirstKey: 1, KeyStep: 1}}},
	"zinterstore":      {specs: []server.KeySpec{{Flags: "OW update", Index: 1, KeyStep: 1}, {Flags: "RO access", Index: 2, KeyNum: true, FirstKey: 1, KeyStep: 1}}},
	"zlexcount":        {specs: []server.KeySpec{{Flags: "RO access", Index: 1, KeyStep: 1}}},
	"zmpop":            {specs: []server.KeySpec{{Flags: "RW access delete", Index: 1, KeyNum: true, FirstKey: 1, KeyStep: 1}}},
	"zmscore":          {specs: []server.KeySpec{{Flags: "RO access", Index: 1, KeyStep: 1}}},
	"zpopmax":          {specs: []server.KeySpec{{Flags: "RW access delete", Index: 1, KeyStep: 1}}},
	"zpopmin":          {specs: []server.KeySpec{{Flags: "RW access delete", Index: 1, KeyStep: 1}}},
	"zrandmember":      {specs: []server.KeySpec{{Flags: "RO access", Index: 1, KeyStep: 1}}, tips: []string{"nondeterministic_output"}},
	"zrange":           {specs: []server.KeySpec{{Flags: "RO access", Index: 1, KeyStep: 1}}},
	"zrangebylex":      {specs: []server.KeySpec{{Flags: "RO access", Index: 1, KeyStep: 1}}},
	"zrangebyscore":    {specs: []server.KeySpec{{Flags: "RO access", Index: 1, KeyStep: 1}}},
	"zrangestore":      {specs: []server.KeySpec{{Flags: "OW update", Index: 1, KeyStep: 1}, {Flags: "RO access", Index: 2, KeyStep: 1}}},
	"zrank":            {specs: []server.KeySpec{{Flags: "RO access", Index: 1, KeyStep: 1}}},
	"zrem":             {specs: []server.KeySpec{{Flags: "RW delete", Index: 1, KeyStep: 1}}},
	"zremrangebylex":   {specs: []server.KeySpec{{Flags: "RW delete", Index: 1, KeyStep: 1}}},
	"zremrangebyrank":  {specs: []server.KeySpec{{Flags: "RW delete", Index: 1, KeyStep: 1}}},
	"zremrangebyscore": {specs: []server.KeySpec{{Flags: "RW delete", Index: 1, KeyStep: 1}}},
	"zrevrange":        {specs: []server.KeySpec{{Flags: "RO access", Index: 1, KeyStep: 1}}},
	"zrevrangebylex":   {specs: []server.KeySpec{{Flags: "RO access", Index: 1, KeyStep: 1}}},
	"zrevrangebyscore": {specs: []server.KeySpec{{Flags: "RO access", Index: 1, KeyStep: 1}}},
	"zrevrank":         {specs: []server.KeySpec{{Flags: "RO access", Index: 1, KeyStep: 1}}},
	"zscan":            {specs: []server.KeySpec{{Flags: "RO access", Index: 1, KeyStep: 1}}, tips: []string{"nondeterministic_output"}},
	"zscore":           {specs: []server.KeySpec{{Flags: "RO access", Index: 1, KeyStep: 1}}},
	"zunion":           {specs: []server.KeySpec{{Flags: "RO access", Index: 1, KeyNum: true, FirstKey: 1, KeyStep: 1}}},
	"zunionstore":      {specs: []server.KeySpec{{Flags: "OW update", Index: 1, KeyStep: 1}, {Flags: "RO access", Index: 2, KeyNum: true, FirstKey: 1, KeyStep: 1}}},
}

// register is server.Register with each command's key specs and tips
// from typeCmdMeta (for the names it has).
func register(cmds ...server.Command) {
	for i := range cmds {
		if m, ok := typeCmdMeta[cmds[i].Name]; ok {
			cmds[i].KeySpecs, cmds[i].Tips = m.specs, m.tips
		}
	}
	server.Register(cmds...)
}
