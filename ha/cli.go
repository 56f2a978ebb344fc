package ha

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// cliUsage is `celld cluster --help`.
const cliUsage = `Usage: celld cluster COMMAND [flags]   (HA mode: topology in etcd, docs/ha.md)

Commands change the cluster's topology document by compare-and-swap:
  init --shards N --replicas R --nodes ID@HOST:PORT,...
        create the document: N shards of R+1 members each, in the order
        given (members 1..R+1 form shard 0, ...), slots split evenly
  add-node ID@HOST:PORT [--shard K | --new-shard] [--repl-addr HOST:PORT]
        add a member (default: to the shard with the fewest members)
  remove-node ID
        remove a member (not the last one of a shard that holds slots)
  move-slots FIRST-LAST --to SHARD [--timeout D] [--no-keys]
        give the slots (all of one shard) to SHARD with their keys: the
        target's leader copies them while the source serves them; then
        they pause (CLUSTERDOWN) while the source's last changes reach the
        target, and the target serves them. A move that does not finish
        within --timeout (per phase, default 30s) is rolled back; running
        the same command again resumes a move whose tool died.
        --no-keys: only flip ownership (the new owner starts the keys from
        a full bucket); also gives unowned slots a shard
  show  print the document, the live nodes and each shard's leader

Flags of every command:
  --etcd URL[,URL]   etcd endpoints (env CELLD_ETCD)
  --cluster NAME     the cluster's name (env CELLD_CLUSTER)
`

// CLI runs `celld cluster ARGS...` and returns the exit code: 0 done, 1 the
// change failed (etcd, a lost race, a refused change), 2 a bad command
// line. getenv reads CELLD_ETCD and CELLD_CLUSTER.
func CLI(args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, cliUsage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	cmd := args[0]
	fs := flag.NewFlagSet("celld cluster "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, cliUsage) }
	etcd := fs.String("etcd", getenv("CELLD_ETCD"), "")
	name := fs.String("cluster", getenv("CELLD_CLUSTER"), "")
	shards := fs.Int("shards", 0, "")
	replicas := fs.Int("replicas", -1, "")
	nodes := fs.String("nodes", "", "")
	shard := fs.Int("shard", -1, "")
	newShard := fs.Bool("new-shard", false, "")
	replAddr := fs.String("repl-addr", "", "")
	to := fs.Int("to", -1, "")
	noKeys := fs.Bool("no-keys", false, "")
	timeout := fs.Duration("timeout", 30*time.Second, "")
	var pos []string
	rest := args[1:]
	for {
		if err := fs.Parse(rest); err != nil {
			return 2
		}
		if fs.NArg() == 0 {
			break
		}
		pos, rest = append(pos, fs.Arg(0)), fs.Args()[1:]
	}
	bad := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "celld cluster %s: "+format+"\n", append([]any{cmd}, a...)...)
		return 2
	}
	if *etcd == "" || *name == "" {
		return bad("--etcd and --cluster (env CELLD_ETCD, CELLD_CLUSTER) are required")
	}
	if strings.Contains(*name, "/") {
		return bad("--cluster may not contain '/'")
	}
	var change func(*Doc) error
	switch cmd {
	case "init":
		if len(pos) != 0 || *shards < 1 || *replicas < 0 || *nodes == "" {
			return bad("usage: init --shards N --replicas R --nodes ID@HOST:PORT,...")
		}
		var ms []Member
		for _, f := range strings.Split(*nodes, ",") {
			m, err := ParseMember(f)
			if err != nil {
				return bad("%v", err)
			}
			ms = append(ms, m)
		}
		d, err := InitDoc(*shards, *replicas, ms)
		if err != nil {
			return bad("%v", err)
		}
		return withEtcd(*etcd, stderr, func(ctx context.Context, cli *clientv3.Client) error {
			if err := CreateDoc(ctx, cli, *name, d); err != nil {
				return err
			}
			stdout.Write(append(d.Marshal(), '\n'))
			return nil
		})
	case "add-node":
		if len(pos) != 1 || (*newShard && *shard >= 0) {
			return bad("usage: add-node ID@HOST:PORT [--shard K | --new-shard] [--repl-addr HOST:PORT]")
		}
		m, err := ParseMember(pos[0])
		if err != nil {
			return bad("%v", err)
		}
		if *replAddr != "" {
			m.ReplAddr = *replAddr
		}
		change = func(d *Doc) error {
			if s, _ := d.Find(m.ID); s >= 0 {
				return fmt.Errorf("node %q is already in shard %d", m.ID, s)
			}
			k := *shard
			switch {
			case *newShard:
				d.Shards = append(d.Shards, Shard{})
				k = len(d.Shards) - 1
			case k < 0:
				k = 0
				for i := range d.Shards {
					if len(d.Shards[i].Members) < len(d.Shards[k].Members) {
						k = i
					}
				}
			case k >= len(d.Shards):
				return fmt.Errorf("no shard %d (there are %d)", k, len(d.Shards))
			}
			d.Shards[k].Members = append(d.Shards[k].Members, m)
			return nil
		}
	case "remove-node":
		if len(pos) != 1 {
			return bad("usage: remove-node ID")
		}
		change = func(d *Doc) error {
			s, _ := d.Find(pos[0])
			if s < 0 {
				return fmt.Errorf("%w: %q", ErrUnknown, pos[0])
			}
			sh := &d.Shards[s]
			if len(sh.Members) == 1 && len(sh.Slots) > 0 {
				return fmt.Errorf("%q is the last member of shard %d, which holds slots: move them first (move-slots)", pos[0], s)
			}
			for i := range sh.Members {
				if sh.Members[i].ID == pos[0] {
					sh.Members = append(sh.Members[:i], sh.Members[i+1:]...)
					break
				}
			}
			return nil
		}
	case "move-slots":
		if len(pos) != 1 || *to < 0 || *timeout <= 0 {
			return bad("usage: move-slots FIRST-LAST --to SHARD [--timeout D] [--no-keys]")
		}
		first, last, err := ParseRange(pos[0])
		if err != nil {
			return bad("%v", err)
		}
		if !*noKeys {
			return withEtcdFor(*etcd, stderr, 3**timeout, func(ctx context.Context, cli *clientv3.Client) error {
				d, rep, err := MoveSlotsStreaming(ctx, cli, *name, first, last, *to, *timeout)
				if err != nil {
					return err
				}
				stdout.Write(append(d.Marshal(), '\n'))
				fmt.Fprintf(stdout, "moved slots %d-%d to shard %d: %d keys copied in %.1f ms; paused %.1f ms; total %.1f ms\n",
					first, last, *to, rep.Keys, rep.CopyMs, float64(rep.Pause.Microseconds())/1000, float64(rep.Total.Microseconds())/1000)
				return nil
			})
		}
		return withEtcd(*etcd, stderr, func(ctx context.Context, cli *clientv3.Client) error {
			d, err := MoveSlots(ctx, cli, *name, first, last, *to)
			if err != nil {
				return err
			}
			stdout.Write(append(d.Marshal(), '\n'))
			return nil
		})
	case "show":
		if len(pos) != 0 {
			return bad("usage: show")
		}
		return withEtcd(*etcd, stderr, func(ctx context.Context, cli *clientv3.Client) error {
			return show(ctx, cli, *name, stdout)
		})
	default:
		return bad("unknown command (init, add-node, remove-node, move-slots, show)")
	}
	return withEtcd(*etcd, stderr, func(ctx context.Context, cli *clientv3.Client) error {
		d, err := UpdateDoc(ctx, cli, *name, change)
		if err != nil {
			return err
		}
		stdout.Write(append(d.Marshal(), '\n'))
		return nil
	})
}

// withEtcd runs fn with a client, within 10 s; an error is printed and
// makes exit code 1.
func withEtcd(endpoints string, stderr io.Writer, fn func(context.Context, *clientv3.Client) error) int {
	return withEtcdFor(endpoints, stderr, 10*time.Second, fn)
}

// withEtcdFor is withEtcd within limit.
func withEtcdFor(endpoints string, stderr io.Writer, limit time.Duration, fn func(context.Context, *clientv3.Client) error) int {
	cli, err := NewClient(endpoints)
	if err != nil {
		fmt.Fprintln(stderr, "celld cluster:", err)
		return 1
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	if err := fn(ctx, cli); err != nil {
		fmt.Fprintln(stderr, "celld cluster:", err)
		return 1
	}
	return 0
}

// NewClient connects to etcd at endpoints (URL[,URL]); the client's own
// logging is off (ha logs what matters through slog).
func NewClient(endpoints string) (*clientv3.Client, error) {
	var eps []string
	for _, e := range strings.Split(endpoints, ",") {
		if e = strings.TrimSpace(e); e != "" {
			eps = append(eps, e)
		}
	}
	if len(eps) == 0 {
		return nil, errors.New("ha: no etcd endpoint")
	}
	return clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
}

// show prints the document, the registered nodes and the leaders.
func show(ctx context.Context, cli *clientv3.Client, name string, w io.Writer) error {
	d, rev, err := ReadDoc(ctx, cli, name)
	if err != nil {
		return err
	}
	n := &Node{cfg: Config{Client: cli, Cluster: name}}
	v, err := n.read(ctx)
	if err != nil {
		return err
	}
	resp, err := cli.Get(ctx, prefix(name)+"nodes/", clientv3.WithPrefix())
	if err != nil {
		return err
	}
	live := map[string]bool{}
	for _, kv := range resp.Kvs {
		live[strings.TrimPrefix(string(kv.Key), prefix(name)+"nodes/")] = true
	}
	fmt.Fprintf(w, "topology (revision %d):\n%s\n", rev, d.Marshal())
	if len(d.Moves) > 0 {
		fmt.Fprintf(w, "moves under way: %s\n", describeMoves(d))
	}
	for i, sh := range d.Shards {
		l, ok := v.leaders[i]
		leader := "none"
		if ok {
			leader = fmt.Sprintf("%s (epoch %d)", l.id, l.rev)
		}
		var ms []string
		for _, m := range sh.Members {
			state := "down"
			if live[m.ID] {
				state = "up"
			}
			ms = append(ms, m.ID+"="+m.Addr+" "+state)
		}
		sort.Strings(ms)
		fmt.Fprintf(w, "shard %d: slots %v, leader %s, members %s\n", i, sh.Slots, leader, strings.Join(ms, ", "))
	}
	return nil
}

// Getenv is os.Getenv, for CLI's getenv.
func Getenv(k string) string { return os.Getenv(k) }
