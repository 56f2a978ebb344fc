package ha

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/celld/celld/cluster"
	"github.com/celld/celld/ha/etcdtest"
)

// TestCLI drives `celld cluster ...` against a real etcd: init, a second
// init refused, add-node, move-slots, remove-node and its refusals, show;
// every change lands in the document.
func TestCLI(t *testing.T) {
	e := etcdtest.Start(t)
	env := func(k string) string {
		return map[string]string{"CELLD_ETCD": e.Endpoint(), "CELLD_CLUSTER": "cli"}[k]
	}
	run := func(want int, args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		if code := CLI(args, &out, &errb, env); code != want {
			t.Fatalf("%v: exit %d, want %d; stderr %s", args, code, want, errb.String())
		}
		return out.String() + errb.String()
	}
	run(0, "init", "--shards", "2", "--replicas", "1", "--nodes", "a@127.0.0.1:7001,b@127.0.0.1:7002,c@127.0.0.1:7003,d@127.0.0.1:7004")
	if out := run(1, "init", "--shards", "1", "--replicas", "0", "--nodes", "z@127.0.0.1:7009"); !strings.Contains(out, ErrDocExists.Error()) {
		t.Errorf("second init: %s", out)
	}
	run(2, "init", "--shards", "2", "--replicas", "1", "--nodes", "a@127.0.0.1:7001")
	run(2, "move-slots", "10-5", "--to", "1")
	run(2, "bogus")
	run(0, "add-node", "e@127.0.0.1:7005", "--new-shard")
	run(0, "move-slots", "0-99", "--to", "2", "--no-keys")
	run(0, "add-node", "f@127.0.0.1:7006", "--repl-addr", "127.0.0.1:9999") // joins the smallest shard: 2
	run(1, "add-node", "f@127.0.0.1:7007")                                  // already there
	run(0, "remove-node", "a")
	run(1, "remove-node", "b") // last member of shard 0, which holds slots
	run(1, "remove-node", "nobody")
	cli := newClient(t, e)
	d, _, err := ReadDoc(context.Background(), cli, "cli")
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Shards) != 3 || d.Shards[2].Slots[0] != (cluster.SlotRange{First: 0, Last: 99}) ||
		d.Shards[0].Slots[0] != (cluster.SlotRange{First: 100, Last: 8191}) || len(d.Shards[0].Members) != 1 {
		t.Fatalf("document: %s", d.Marshal())
	}
	if s, m := d.Find("f"); s != 2 || m.ReplAddr != "127.0.0.1:9999" {
		t.Errorf("f in shard %d, %+v", s, m)
	}
	if out := run(0, "show"); !strings.Contains(out, "shard 2: slots [{0 99}], leader none, members e=127.0.0.1:7005 down, f=127.0.0.1:7006 down") {
		t.Errorf("show: %s", out)
	}
	if out := run(2, "show", "--cluster", ""); !strings.Contains(out, "required") {
		t.Errorf("show without --cluster: %s", out)
	}
}
