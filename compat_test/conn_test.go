package compat_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// Connection and introspection commands: PING, ECHO, TIME, HELLO, CLIENT,
// RESET, COMMAND.

func TestPingEchoTime(t *testing.T) {
	protocols(t, func(t *testing.T, ts *testServer, send do) {
		runSteps(t, ts, send, []step{
			// TIME is the server clock: t0 + 1 µs.
			{c("TIME"), []any{"1700000000", "1"}},
			{c("PING"), "PONG"},
			{c("PING hello"), "hello"},
			{[]any{"PING", ""}, ""},
			{c("PING a b"), errText("ERR wrong number of arguments for 'ping' command")},
			{c("ECHO x"), "x"},
			{[]any{"ECHO", "a\x00b\r\n"}, "a\x00b\r\n"},
			{c("ECHO"), errText("ERR wrong number of arguments for 'echo' command")},
			{c("ECHO a b"), errText("ERR wrong number of arguments for 'echo' command")},
			advance(1234567 * tick),
			{c("TIME"), []any{"1700000001", "234577"}}, // 10 ticks + 1234567 µs
		})
	})
}

// helloBody is HELLO's reply after its header: seven pairs, the modules
// entry a map (RESP3 "%") or a flat array (RESP2 "*").
func helloBody(proto, id int64, mapHdr string) string {
	return "$6\r\nserver\r\n$5\r\nredis\r\n" +
		"$7\r\nversion\r\n$5\r\n7.2.4\r\n" +
		"$5\r\nproto\r\n:" + strconv.FormatInt(proto, 10) + "\r\n" +
		"$2\r\nid\r\n:" + strconv.FormatInt(id, 10) + "\r\n" +
		"$4\r\nmode\r\n$10\r\nstandalone\r\n" +
		"$4\r\nrole\r\n$6\r\nmaster\r\n" +
		"$7\r\nmodules\r\n*1\r\n" + mapHdr + "\r\n" +
		"$4\r\nname\r\n$10\r\nredis-cell\r\n" +
		"$3\r\nver\r\n:1\r\n" +
		"$4\r\npath\r\n$39\r\n/usr/lib/redis/modules/libredis_cell.so\r\n" +
		"$4\r\nargs\r\n*0\r\n"
}

func hello2(id int64) string { return "*14\r\n" + helloBody(2, id, "*8") }
func hello3(id int64) string { return "%7\r\n" + helloBody(3, id, "%4") }

// clientID asks a raw connection for its id.
func clientID(t *testing.T, rc *rawConn) int64 {
	t.Helper()
	rc.write(resp("CLIENT", "ID"))
	line := rc.readLine()
	id, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimPrefix(line, ":"), "\r\n"), 10, 64)
	if err != nil {
		t.Fatalf("CLIENT ID = %q", line)
	}
	return id
}

func TestHelloRaw(t *testing.T) {
	ts := startServer(t, withFakeClock(t0))
	rc := dialRaw(t, ts)
	id := clientID(t, rc)
	runRaw(t, rc, []rawStep{
		// No argument: the current protocol, RESP2 on a new connection.
		{resp("HELLO"), hello2(id)},
		{resp("HELLO", "2"), hello2(id)},
		// HELLO 3: a RESP3 map; what follows speaks RESP3 (null is _).
		{resp("HELLO", "3"), hello3(id)},
		{resp("GET", "missing"), "_\r\n"},
		{resp("HELLO"), hello3(id)},
		{resp("HELLO", "4"), "-NOPROTO unsupported protocol version\r\n"},
		{resp("HELLO", "1"), "-NOPROTO unsupported protocol version\r\n"},
		{resp("HELLO", "abc"), "-ERR Protocol version is not an integer or out of range\r\n"},
		{resp("HELLO", "3", "FOO"), "-ERR Syntax error in HELLO option 'FOO'\r\n"},
		{resp("HELLO", "3", "SETNAME"), "-ERR Syntax error in HELLO option 'SETNAME'\r\n"},
		// A failed HELLO changes nothing.
		{resp("GET", "missing"), "_\r\n"},
		{resp("HELLO", "3", "SETNAME", "myname"), hello3(id)},
		{resp("CLIENT", "GETNAME"), "$6\r\nmyname\r\n"},
		{resp("HELLO", "2", "AUTH", "default", "anything"), hello2(id)},
		{resp("GET", "missing"), "$-1\r\n"},
		{resp("HELLO", "2", "AUTH", "nobody", "x"), "-WRONGPASS invalid username-password pair or user is disabled.\r\n"},
	})
}

func TestHelloThroughGoRedis(t *testing.T) {
	ts := startServer(t, withFakeClock(t0))
	rdb := newGoRedis(t, ts)
	conn := rdb.Conn()
	t.Cleanup(func() { conn.Close() })
	id, err := conn.ClientID(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	modules := []any{map[string]any{"name": "redis-cell", "ver": int64(1), "path": "/usr/lib/redis/modules/libredis_cell.so", "args": []any{}}}
	runSteps(t, ts, goRedisDo(conn), []step{
		{c("HELLO 3"), map[string]any{"server": "redis", "version": "7.2.4", "proto": int64(3), "id": id,
			"mode": "standalone", "role": "master", "modules": modules}},
		{c("HELLO 4"), errText("NOPROTO unsupported protocol version")},
	})
}

func TestClientCommands(t *testing.T) {
	ts := startServer(t, withFakeClock(t0))
	a := dialRaw(t, ts)
	b := dialRaw(t, ts)
	idA, idB := clientID(t, a), clientID(t, b)
	if idA == idB {
		t.Fatalf("two connections share id %d", idA)
	}
	runRaw(t, a, []rawStep{
		{resp("CLIENT", "GETNAME"), "$-1\r\n"},
		{resp("CLIENT", "SETNAME", "alpha"), "+OK\r\n"},
		{resp("CLIENT", "GETNAME"), "$5\r\nalpha\r\n"},
		{resp("CLIENT", "SETNAME", "a b"), "-ERR Client names cannot contain spaces, newlines or special characters.\r\n"},
		{resp("CLIENT", "SETNAME", "a\nb"), "-ERR Client names cannot contain spaces, newlines or special characters.\r\n"},
		{resp("CLIENT", "GETNAME"), "$5\r\nalpha\r\n"},
		{resp("CLIENT", "SETNAME", ""), "+OK\r\n"}, // the empty name clears it
		{resp("CLIENT", "GETNAME"), "$-1\r\n"},
		{resp("CLIENT", "SETNAME", "alpha"), "+OK\r\n"},
		{resp("CLIENT", "SETINFO", "lib-name", "mylib"), "+OK\r\n"},
		{resp("CLIENT", "SETINFO", "LIB-VER", "1.2.3"), "+OK\r\n"},
		{resp("CLIENT", "SETINFO", "lib-name", "my lib"), "-ERR lib-name cannot contain spaces, newlines or special characters.\r\n"},
		{resp("CLIENT", "SETINFO", "foo", "x"), "-ERR Unrecognized option 'foo'\r\n"},
		{resp("CLIENT", "SETINFO", "lib-name"), "-ERR wrong number of arguments for 'client|setinfo' command\r\n"},
		{resp("CLIENT", "ID", "x"), "-ERR wrong number of arguments for 'client|id' command\r\n"},
		{resp("CLIENT", "FOO"), "-ERR unknown subcommand 'FOO'. Try CLIENT HELP.\r\n"},
		{resp("CLIENT"), "-ERR wrong number of arguments for 'client' command\r\n"},
	})

	// CLIENT INFO: one line, Redis 7 fields, this connection's.
	a.write(resp("CLIENT", "INFO"))
	info := readBulk(t, a)
	for _, w := range []string{
		fmt.Sprintf("id=%d ", idA), " name=alpha ", " db=0 ", " resp=2 ",
		" lib-name=mylib ", " lib-ver=1.2.3\n", " flags=N ", " multi=-1 ",
		// Redis 7 names the running command with its subcommand.
		" cmd=client|info ",
	} {
		if !strings.Contains(info, w) {
			t.Errorf("CLIENT INFO %q lacks %q", info, w)
		}
	}
	if strings.Count(info, "\n") != 1 || !strings.HasSuffix(info, "\n") {
		t.Errorf("CLIENT INFO %q: want one newline-terminated line", info)
	}

	// CLIENT LIST: both connections, one line each, in id order.
	runRaw(t, b, []rawStep{{resp("CLIENT", "SETNAME", "beta"), "+OK\r\n"}})
	a.write(resp("CLIENT", "LIST"))
	list := strings.Split(strings.TrimSuffix(readBulk(t, a), "\n"), "\n")
	if len(list) != 2 || !strings.HasPrefix(list[0], fmt.Sprintf("id=%d ", idA)) ||
		!strings.HasPrefix(list[1], fmt.Sprintf("id=%d ", idB)) ||
		!strings.Contains(list[0], " name=alpha ") || !strings.Contains(list[1], " name=beta ") {
		t.Errorf("CLIENT LIST = %q", list)
	}
	if !strings.Contains(list[0], " cmd=client|list ") {
		t.Errorf("CLIENT LIST own line %q lacks cmd=client|list", list[0])
	}
	a.write(resp("CLIENT", "LIST", "ID", strconv.FormatInt(idB, 10)))
	if one := readBulk(t, a); !strings.HasPrefix(one, fmt.Sprintf("id=%d ", idB)) || strings.Count(one, "\n") != 1 {
		t.Errorf("CLIENT LIST ID %d = %q", idB, one)
	}
	runRaw(t, a, []rawStep{
		{resp("CLIENT", "LIST", "ID", "abc"), "-ERR Invalid client ID\r\n"},
		{resp("CLIENT", "LIST", "TYPE", "foo"), "-ERR Unknown client type 'foo'\r\n"},
	})
}

// readBulk reads one bulk string reply ($n) and returns its body.
func readBulk(t *testing.T, rc *rawConn) string {
	t.Helper()
	hdr := rc.readLine()
	n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(hdr, "$"), "\r\n"))
	if !strings.HasPrefix(hdr, "$") || err != nil {
		t.Fatalf("want a bulk string, got %q", hdr)
	}
	body := rc.read(n + 2)
	return body[:n]
}

func TestClientSetInfoFromClients(t *testing.T) {
	ts := startServer(t)
	rdb := newGoRedis(t, ts)
	info, err := rdb.ClientInfo(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if info.Resp != 3 || !strings.HasPrefix(info.LibName, "go-redis") || info.LibVer == "" {
		t.Errorf("go-redis connection: resp=%d lib-name=%q lib-ver=%q", info.Resp, info.LibName, info.LibVer)
	}
	rdb2 := newGoRedis(t, ts, resp2)
	info, err = rdb2.ClientInfo(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if info.Resp != 2 {
		t.Errorf("go-redis Protocol 2: resp=%d", info.Resp)
	}
}

func TestReset(t *testing.T) {
	ts := startServer(t, withFakeClock(t0))
	rc := dialRaw(t, ts)
	id := clientID(t, rc)
	rc.write(resp("HELLO", "3"))
	rc.read(len(hello3(id)))
	runRaw(t, rc, []rawStep{
		{resp("CLIENT", "SETNAME", "x"), "+OK\r\n"},
		{resp("WATCH", "w"), "+OK\r\n"},
		{resp("MULTI"), "+OK\r\n"},
		{resp("CL.THROTTLE", "r", "0", "1", "60"), "+QUEUED\r\n"},
		{resp("RESET"), "+RESET\r\n"},
		// Back to RESP2, no name, no transaction, nothing ran.
		{resp("CLIENT", "GETNAME"), "$-1\r\n"},
		{resp("EXEC"), "-ERR EXEC without MULTI\r\n"},
		{resp("EXISTS", "r"), ":0\r\n"},
		{resp("HELLO"), hello2(id)},
		{resp("RESET", "x"), "-ERR wrong number of arguments for 'reset' command\r\n"},
	})
}

func TestCommandIntrospection(t *testing.T) {
	protocols(t, func(t *testing.T, ts *testServer, send do) {
		list, err := send("COMMAND", "LIST")
		if err != nil {
			t.Fatal(err)
		}
		names, _ := list.([]any)
		found, top := false, 0 // COMMAND LIST has subcommands; COMMAND COUNT does not
		for _, n := range names {
			found = found || n == "cl.throttle"
			if s, _ := n.(string); !strings.Contains(s, "|") {
				top++
			}
		}
		if !found {
			t.Errorf("COMMAND LIST lacks cl.throttle: %s", show(list))
		}
		runSteps(t, ts, send, []step{
			{c("COMMAND COUNT"), int64(top)},
			{c("COMMAND GETKEYS CL.THROTTLE k 1 2 3"), []any{"k"}},
			{c("COMMAND GETKEYS cl.throttle k 1 2 3 4"), []any{"k"}},
			{c("COMMAND GETKEYS GET"), errText("ERR Invalid number of arguments specified for command")},
			{c("COMMAND GETKEYS NOSUCH k"), errText("ERR Invalid command specified")},
			{c("COMMAND GETKEYS PING"), errText("ERR The command has no key arguments")},
			{c("COMMAND LIST FILTERBY MODULE redis-cell"), []any{"cl.throttle"}},
			{c("COMMAND LIST FILTERBY PATTERN cl.*"), []any{"cl.mpthrottle", "cl.mthrottle", "cl.pthrottle", "cl.pthrottle_ro", "cl.throttle", "cl.throttle_ro", "cl.window"}}, // docs/gcra-family.md, docs/cl-window.md
			{c("COMMAND INFO nosuch"), []any{nil}},
			{c("COMMAND FOO"), errText("ERR unknown subcommand 'FOO'. Try COMMAND HELP.")},
		})
		for _, name := range []string{"cl.throttle", "CL.THROTTLE"} {
			info, err := send("COMMAND", "INFO", name)
			if err != nil {
				t.Fatal(err)
			}
			arr, _ := info.([]any)
			if len(arr) != 1 {
				t.Fatalf("COMMAND INFO %s = %s", name, show(info))
			}
			e, _ := arr[0].([]any)
			if len(e) < 7 {
				t.Fatalf("COMMAND INFO %s entry = %s", name, show(arr[0]))
			}
			got := []any{e[0], e[1], e[2], e[3], e[4], e[5]}
			want := []any{"cl.throttle", int64(-1), []any{"write", "module"}, int64(1), int64(1), int64(1)}
			if show(got) != show(want) {
				t.Errorf("COMMAND INFO %s = %s, want %s", name, show(got), show(want))
			}
		}
		docs, err := send("COMMAND", "DOCS", "cl.throttle")
		if err != nil {
			t.Fatal(err)
		}
		var entry any
		switch d := docs.(type) {
		case map[string]any: // RESP3
			entry = d["cl.throttle"]
		case []any: // RESP2: name, doc
			if len(d) == 2 && d[0] == "cl.throttle" {
				entry = d[1]
			}
		}
		if entry == nil {
			t.Errorf("COMMAND DOCS cl.throttle = %s", show(docs))
		}
	})
}

// TestGoRedisCommand: go-redis parses the whole COMMAND reply (it does so to
// route read-only commands) and finds cl.throttle.
func TestGoRedisCommand(t *testing.T) {
	ts := startServer(t)
	for name, mods := range map[string][]func(*redis.Options){"resp3": nil, "resp2": {resp2}} {
		t.Run(name, func(t *testing.T) {
			rdb := newGoRedis(t, ts, mods...)
			cmds, err := rdb.Command(ctx).Result()
			if err != nil {
				t.Fatalf("COMMAND: %v", err)
			}
			ct, ok := cmds["cl.throttle"]
			if !ok {
				t.Fatalf("COMMAND lacks cl.throttle (%d commands)", len(cmds))
			}
			if ct.Arity != -1 || ct.FirstKeyPos != 1 || ct.LastKeyPos != 1 || ct.StepCount != 1 ||
				len(ct.Flags) != 2 || ct.Flags[0] != "write" || ct.Flags[1] != "module" || ct.ReadOnly {
				t.Errorf("cl.throttle = %+v", ct)
			}
			if g := cmds["get"]; g == nil || !g.ReadOnly {
				t.Errorf("get = %+v, want read-only", g)
			}
		})
	}
}
