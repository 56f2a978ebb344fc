package server

import (
	"strconv"
	"strings"
	"testing"

	"github.com/celld/celld/cluster"
)

func argv(line string) [][]byte {
	var out [][]byte
	for _, f := range strings.Fields(line) {
		out = append(out, []byte(f))
	}
	return out
}

// TestFoldKeySlot checks the key positions routing reads from the table:
// fixed positions, last = -1, a command short of its key, and EVAL's
// numkeys.
func TestFoldKeySlot(t *testing.T) {
	foo, bar := cluster.KeySlotString("foo"), cluster.KeySlotString("bar")
	cases := []struct {
		cmd  string
		slot int
		ok   bool
	}{
		{"cl.throttle foo 5 1 60", foo, true},
		{"cl.throttle", -1, true}, // no key: served here, answers its usage error
		{"get bar", bar, true},
		{"del foo {foo}x", foo, true},
		{"del foo bar", foo, false},
		{"exists bar bar bar", bar, true},
		{"set foo 1 ex 10", foo, true}, // only args[1] is a key
		{"watch {bar}1 {bar}2", bar, true},
		{"eval x 0 foo bar", -1, true}, // numkeys 0: foo and bar are arguments
		{"eval x 1 foo bar", foo, true},
		{"eval x 2 foo bar", foo, false},
		{"evalsha_ro x 2 {bar}a {bar}b", bar, true},
		{"eval x 9 foo", -1, true}, // numkeys too large: no keys (EVAL's own error)
		{"eval x 2 foo", -1, true},
		{"eval x 1 foo", foo, true},
		{"eval x -1 foo", -1, true},
		{"ping foo", -1, true},
		{"keys foo", -1, true},
	}
	for i, c := range cases {
		args := argv(c.cmd)
		cmd := lookup(commands, args[0])
		if cmd == nil {
			if movableKeys(string(args[0])) {
				cmd = &command{name: string(args[0])} // scripting not built in
			} else {
				t.Fatalf("step %d: no command %q", i, args[0])
			}
		}
		slot, ok := foldKeySlot(cmd, args, -1)
		if ok != c.ok || (ok && slot != c.slot) {
			t.Errorf("step %d: %s: slot %d ok %v, want %d %v", i, c.cmd, slot, ok, c.slot, c.ok)
		}
	}
}

// TestClusterScriptCheck covers the per-call check a script's commands get:
// same slot across the script, served here, cross-slot in one command.
func TestClusterScriptCheck(t *testing.T) {
	// Two nodes; find keys on node 0 in two slots, and one on node 1.
	topo, err := cluster.Static([]string{"127.0.0.1:7001", "127.0.0.1:7002"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{cfg: Config{Cluster: topo}}
	s.topo.Store(topo)
	var local []string
	remote := ""
	for i := 0; len(local) < 2 || remote == ""; i++ {
		k := "k" + strconv.Itoa(i)
		slot := cluster.KeySlotString(k)
		switch {
		case !topo.Owns(slot):
			remote = k
		case len(local) == 0 || (len(local) == 1 && cluster.KeySlotString(local[0]) != slot):
			local = append(local, k)
		}
	}
	get, del := commands["get"], commands["del"]
	steps := []struct {
		cmd   *command
		args  string
		cross bool
		want  string
	}{
		{get, "get " + local[0], false, ""},
		{get, "get " + local[0], false, ""},
		{get, "get " + local[1], false, "Script attempted to access keys that do not hash to the same slot"},
		{get, "get " + local[1], true, ""}, // allow-cross-slot-keys
		{get, "get " + remote, true, "Script attempted to access a non local key in a cluster node"},
		{del, "del " + local[0] + " " + local[1], true, "Command 'del' in script attempted to access keys that don't hash to the same slot"},
		{commands["ping"], "ping", false, ""},
	}
	slot := -1
	for i, st := range steps {
		if got := s.clusterScriptCheck(st.cmd, argv(st.args), &slot, st.cross); got != st.want {
			t.Errorf("step %d: %s: %q, want %q", i, st.args, got, st.want)
		}
	}
	if slot != cluster.KeySlotString(local[0]) {
		t.Errorf("script slot %d, want %d", slot, cluster.KeySlotString(local[0]))
	}
	standalone := &Server{}
	if got := standalone.clusterScriptCheck(get, argv("get "+remote), &slot, false); got != "" {
		t.Errorf("standalone: %q", got)
	}
}

// TestClusterShardsHostname: a node announced by name gets Redis 7.2's
// "hostname" field in CLUSTER SHARDS; one announced by IP does not.
func TestClusterShardsHostname(t *testing.T) {
	topo, err := cluster.Static([]string{"node-a:7001", "10.0.0.2:7002"}, 1)
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{cfg: Config{Cluster: topo}}
	s.topo.Store(topo)
	c := &client{srv: s, resp3: true}
	cmdClusterShards(s, c, nil)
	out := string(c.out)
	if strings.Count(out, "$8\r\nhostname\r\n$6\r\nnode-a\r\n") != 1 || strings.Count(out, "hostname") != 1 {
		t.Errorf("CLUSTER SHARDS: %q", out)
	}
	if !strings.HasPrefix(out, "*2\r\n%2\r\n$5\r\nslots\r\n*2\r\n:0\r\n:8191\r\n$5\r\nnodes\r\n*1\r\n%8\r\n") {
		t.Errorf("CLUSTER SHARDS shape: %q", out)
	}
	want := topo.Nodes()[0].ID + " node-a:7001@0 master - 0 0 1 connected 0-8191\n" +
		topo.Nodes()[1].ID + " 10.0.0.2:7002@0 myself,master - 0 0 2 connected 8192-16383\n"
	if got := s.clusterNodesText(); got != want {
		t.Errorf("CLUSTER NODES\n got: %q\nwant: %q", got, want)
	}
}
