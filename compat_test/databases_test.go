package compat_test

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// Databases (docs/databases.md): SELECT, SWAPDB, MOVE, FLUSHDB/FLUSHALL,
// DBSIZE, RANDOMKEY, WATCH and scripts per database, answered as Redis
// 7.0.15 answers them (differentially, against a real redis-server), and
// real clients that select a database on connect.

func TestRedisDiffDatabases(t *testing.T) {
	diffRun(t, []dstep{
		dw("SELECT 16", "-ERR DB index is out of range\r\n"),
		dw("SELECT -1", "-ERR DB index is out of range\r\n"),
		dw("SELECT x", "-ERR value is not an integer or out of range\r\n"),
		d("SELECT 2147483648"),
		d("SELECT 1.5"),
		dw("SELECT 15", "+OK\r\n"),
		dw("SET k 15", "+OK\r\n"),
		dw("SELECT 3", "+OK\r\n"),
		dw("GET k", "$-1\r\n"),
		dw("SET k 3", "+OK\r\n"),
		d("DBSIZE"),
		dw("RANDOMKEY", "$1\r\nk\r\n"),
		// SWAPDB's texts and effect.
		dw("SWAPDB x 1", "-ERR invalid first DB index\r\n"),
		dw("SWAPDB 1 x", "-ERR invalid second DB index\r\n"),
		dw("SWAPDB 1 99999999999", "-ERR invalid second DB index\r\n"),
		dw("SWAPDB 1 16", "-ERR DB index is out of range\r\n"),
		dw("SWAPDB -1 1", "-ERR DB index is out of range\r\n"),
		dw("SWAPDB 3 3", "+OK\r\n"),
		dw("SWAPDB 3 15", "+OK\r\n"),
		dw("GET k", "$2\r\n15\r\n"), // this connection stays in db 3, which now holds db 15's keys
		dw("SELECT 15", "+OK\r\n"),
		dw("GET k", "$1\r\n3\r\n"),
		// MOVE.
		dw("MOVE k 15", "-ERR source and destination objects are the same\r\n"),
		dw("MOVE k x", "-ERR value is not an integer or out of range\r\n"),
		dw("MOVE k 16", "-ERR DB index is out of range\r\n"),
		dw("MOVE nokey 0", ":0\r\n"),
		dw("MOVE k 3", ":0\r\n"), // db 3 has k
		dw("PEXPIRE k 100000", ":1\r\n"),
		dw("MOVE k 0", ":1\r\n"),
		dw("EXISTS k", ":0\r\n"),
		dw("SELECT 0", "+OK\r\n"),
		dw("GET k", "$1\r\n3\r\n"),
		{cmd: []string{"PTTL", "k"}, norm: func(s string) string {
			if strings.HasPrefix(s, ":9") || strings.HasPrefix(s, ":10") {
				return "ttl kept"
			}
			return s
		}, want: "ttl kept"},
		// FLUSHDB empties the selected database only; FLUSHALL every one.
		dw("FLUSHDB", "+OK\r\n"),
		dw("DBSIZE", ":0\r\n"),
		dw("RANDOMKEY", "$-1\r\n"),
		dw("SELECT 3", "+OK\r\n"),
		dw("DBSIZE", ":1\r\n"),
		dw("FLUSHALL", "+OK\r\n"),
		dw("DBSIZE", ":0\r\n"),
		dw("SELECT 1", "+OK\r\n"),
		dw("RESET", "+RESET\r\n"),
		dw("SET r 0", "+OK\r\n"),
		dw("SELECT 1", "+OK\r\n"),
		dw("EXISTS r", ":0\r\n"), // RESET went back to db 0
		// A script runs in its caller's database; a SELECT inside it does
		// not change the caller's.
		{cmd: []string{"EVAL", "redis.call('SELECT', 2); redis.call('SET', KEYS[1], 22); return redis.call('GET', KEYS[1])", "1", "s"}, want: "$2\r\n22\r\n"},
		dw("EXISTS s", ":0\r\n"),
		{cmd: []string{"EVAL", "return redis.call('EXISTS', KEYS[1])", "1", "s"}, want: ":0\r\n"},
		dw("SELECT 2", "+OK\r\n"),
		dw("GET s", "$2\r\n22\r\n"),
		// MULTI: a SELECT queued in a transaction applies to what follows.
		dw("MULTI", "+OK\r\n"),
		dw("SELECT 4", "+QUEUED\r\n"),
		dw("SET m 4", "+QUEUED\r\n"),
		dw("EXEC", "*2\r\n+OK\r\n+OK\r\n"),
		dw("GET m", "$1\r\n4\r\n"),
		dw("SELECT 2", "+OK\r\n"),
		dw("GET m", "$-1\r\n"),
	})
}

// WATCH is per (database, key): a write to the same name in another
// database does not touch it; SWAPDB and FLUSHALL do.
func TestRedisDiffWatchPerDatabase(t *testing.T) {
	diffMulti(t, 2, []dstep{
		{cmd: strings.Fields("SELECT 1"), want: "+OK\r\n"},
		{cmd: strings.Fields("WATCH k"), want: "+OK\r\n"},
		{cmd: strings.Fields("SET k 0"), conn: 1, want: "+OK\r\n"}, // db 0
		{cmd: strings.Fields("MULTI")},
		{cmd: strings.Fields("SET k 1")},
		{cmd: strings.Fields("EXEC"), want: "*1\r\n+OK\r\n"},
		{cmd: strings.Fields("WATCH k"), want: "+OK\r\n"},
		{cmd: strings.Fields("SELECT 1"), conn: 1},
		{cmd: strings.Fields("SET k 2"), conn: 1},
		{cmd: strings.Fields("MULTI")},
		{cmd: strings.Fields("SET k 1")},
		{cmd: strings.Fields("EXEC"), want: "*-1\r\n"},
		// WATCH in db 1, then SELECT 0: EXEC checks db 1's key.
		{cmd: strings.Fields("WATCH k")},
		{cmd: strings.Fields("SELECT 0")},
		{cmd: strings.Fields("SET k 9"), conn: 1}, // conn 1 is in db 1
		{cmd: strings.Fields("MULTI")},
		{cmd: strings.Fields("GET k")},
		{cmd: strings.Fields("EXEC"), want: "*-1\r\n"},
		// SWAPDB touches a watched key that exists on either side.
		{cmd: strings.Fields("SELECT 5")},
		{cmd: strings.Fields("WATCH k")},
		{cmd: strings.Fields("SWAPDB 1 5"), conn: 1, want: "+OK\r\n"},
		{cmd: strings.Fields("MULTI")},
		{cmd: strings.Fields("GET k")},
		{cmd: strings.Fields("EXEC"), want: "*-1\r\n"},
		// ... and not one in neither.
		{cmd: strings.Fields("WATCH nokey")},
		{cmd: strings.Fields("SWAPDB 1 5"), conn: 1},
		{cmd: strings.Fields("MULTI")},
		{cmd: strings.Fields("GET nokey")},
		{cmd: strings.Fields("EXEC"), want: "*1\r\n$-1\r\n"},
		// MOVE touches the watchers of both databases.
		{cmd: strings.Fields("SELECT 7")},
		{cmd: strings.Fields("WATCH k")},
		{cmd: strings.Fields("SELECT 1"), conn: 1},
		{cmd: strings.Fields("MOVE k 7"), conn: 1, want: ":1\r\n"},
		{cmd: strings.Fields("MULTI")},
		{cmd: strings.Fields("GET k")},
		{cmd: strings.Fields("EXEC"), want: "*-1\r\n"},
		// FLUSHALL touches a watched key of any database.
		{cmd: strings.Fields("WATCH k")},
		{cmd: strings.Fields("FLUSHALL"), conn: 1},
		{cmd: strings.Fields("MULTI")},
		{cmd: strings.Fields("GET k")},
		{cmd: strings.Fields("EXEC"), want: "*-1\r\n"},
	})
}

// go-redis with DB: 3 (it sends SELECT 3 on every new connection): its
// CL.THROTTLE and keys are database 3's, apart from database 0's.
func TestGoRedisDB3(t *testing.T) {
	ts := startServer(t)
	db3 := newGoRedis(t, ts, func(o *redis.Options) { o.DB = 3 })
	db0 := newGoRedis(t, ts)
	throttle := func(c *redis.Client) []int64 {
		t.Helper()
		v, err := c.Do(ctx, "CL.THROTTLE", "user:1", 1, 1, 60, 1).Int64Slice()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if r := throttle(db3); r[0] != 0 || r[2] != 1 {
		t.Fatalf("db 3 first call: %v", r)
	}
	if r := throttle(db3); r[0] != 0 || r[2] != 0 {
		t.Fatalf("db 3 second call: %v", r)
	}
	if r := throttle(db3); r[0] != 1 {
		t.Fatalf("db 3 third call not limited: %v", r)
	}
	if r := throttle(db0); r[0] != 0 || r[2] != 1 {
		t.Fatalf("db 0 sees db 3's state: %v", r)
	}
	if err := db3.Set(ctx, "counter", 33, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if v, err := db3.Get(ctx, "counter").Int(); err != nil || v != 33 {
		t.Fatalf("db 3 GET counter = %v, %v", v, err)
	}
	if err := db0.Get(ctx, "counter").Err(); err != redis.Nil {
		t.Fatalf("db 0 GET counter: %v, want nil", err)
	}
	if n, _ := db3.DBSize(ctx).Result(); n != 2 {
		t.Fatalf("db 3 DBSIZE = %d, want 2", n)
	}
	info, err := db0.Info(ctx, "keyspace").Result()
	if err != nil || !strings.Contains(info, "db0:keys=1,expires=1,") || !strings.Contains(info, "db3:keys=2,expires=1,") {
		t.Fatalf("INFO keyspace: %q %v", info, err)
	}
	list, err := db3.ClientList(ctx).Result()
	if err != nil || !strings.Contains(list, " db=3 ") || !strings.Contains(list, " db=0 ") {
		t.Fatalf("CLIENT LIST: %q %v", list, err)
	}
	if v, err := db0.ConfigGet(ctx, "databases").Result(); err != nil || v["databases"] != "16" {
		t.Fatalf("CONFIG GET databases = %v, %v", v, err)
	}
}

// redis-py with db=3 and with a redis://host:port/3 URL.
func TestRedisPyDB3(t *testing.T) {
	// apt's python3-redis is under /usr/bin/python3, which a python3
	// earlier on PATH (pyenv, a venv) does not see.
	var py string
	err := errors.New("no python3")
	for _, p := range []string{"python3", "/usr/bin/python3"} {
		if path, lerr := exec.LookPath(p); lerr == nil && exec.Command(path, "-c", "import redis").Run() == nil {
			py, err = path, nil
			break
		}
	}
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("python3 with the redis package not found: .ci/run installs python3-redis")
		}
		t.Skip("python3-redis not installed (apt-get install python3-redis); CI always runs this")
	}
	ts := startServer(t)
	host, port, _ := strings.Cut(ts.Addr, ":")
	script := `
import sys, redis
host, port = sys.argv[1], int(sys.argv[2])
a = redis.Redis(host=host, port=port, db=3)
u = redis.Redis.from_url("redis://%s:%d/3" % (host, port))
z = redis.Redis(host=host, port=port)
r = [a.execute_command("CL.THROTTLE", "k", 1, 1, 60, 1)[0] for _ in range(3)]
assert r == [0, 0, 1], r
assert u.execute_command("CL.THROTTLE", "k", 1, 1, 60, 1)[0] == 1  # the URL's client shares db 3
assert z.execute_command("CL.THROTTLE", "k", 1, 1, 60, 1)[0] == 0  # db 0 is apart
a.set("n", 7)
assert u.get("n") == b"7", u.get("n")
assert z.get("n") is None
assert a.connection_pool.connection_kwargs["db"] == 3 and u.connection_pool.connection_kwargs["db"] == 3
print("ok")
`
	out, err := exec.Command(py, "-c", script, host, port).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Fatalf("redis-py: %v\n%s", err, out)
	}
}

// ioredis with db: 3. ioredis is an npm package, not installed by CI: the
// test runs when CELLD_IOREDIS names a node_modules directory holding it
// (mkdir d && cd d && npm install ioredis@5), else it is skipped.
func TestIORedisDB3(t *testing.T) {
	mods := os.Getenv("CELLD_IOREDIS")
	node, err := exec.LookPath("node")
	if mods == "" || err != nil {
		t.Skip("set CELLD_IOREDIS to a node_modules directory with ioredis (npm install ioredis@5) to run this")
	}
	ts := startServer(t)
	host, port, _ := strings.Cut(ts.Addr, ":")
	script := `
const Redis = require("ioredis");
const [host, port] = process.argv.slice(1);
(async () => {
  const a = new Redis({host, port: +port, db: 3});
  const z = new Redis({host, port: +port});
  const r = [];
  for (let i = 0; i < 3; i++) r.push((await a.call("CL.THROTTLE", "k", 1, 1, 60, 1))[0]);
  if (r.join() !== "0,0,1") throw new Error("db 3: " + r);
  if ((await z.call("CL.THROTTLE", "k", 1, 1, 60, 1))[0] !== 0) throw new Error("db 0 sees db 3");
  await a.set("n", 7);
  if ((await a.get("n")) !== "7" || (await z.get("n")) !== null) throw new Error("GET n");
  a.disconnect(); z.disconnect();
  console.log("ok");
})().catch(e => { console.error(e); process.exit(1); });
`
	cmd := exec.Command(node, "-e", script, host, port)
	cmd.Env = append(os.Environ(), "NODE_PATH="+mods)
	out, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Fatalf("ioredis: %v\n%s", err, out)
	}
}

// Cluster mode serves database 0 only, with Redis Cluster's texts.
func TestClusterDatabaseZeroOnly(t *testing.T) {
	nodes := startClusterNodes(t, 1)
	c := dialRaw(t, nodes[0])
	for _, st := range []struct {
		cmd  []string
		want string
	}{
		{[]string{"SELECT", "0"}, "+OK\r\n"},
		{[]string{"SELECT", "1"}, "-ERR SELECT is not allowed in cluster mode\r\n"},
		{[]string{"SELECT", "99"}, "-ERR SELECT is not allowed in cluster mode\r\n"},
		{[]string{"SWAPDB", "0", "1"}, "-ERR SWAPDB is not allowed in cluster mode\r\n"},
		{[]string{"MOVE", "k", "1"}, "-ERR MOVE is not allowed in cluster mode\r\n"},
		{[]string{"CONFIG", "GET", "databases"}, "*2\r\n$9\r\ndatabases\r\n$2\r\n16\r\n"},
	} {
		c.write(resp(st.cmd...))
		if got := c.readReply(); got != st.want {
			t.Errorf("%v: %q, want %q", st.cmd, got, st.want)
		}
	}
}
