package ha

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Keys of a cluster in etcd.
func prefix(cluster string) string      { return "/celld/" + cluster + "/" }
func topologyKey(cluster string) string { return prefix(cluster) + "topology" }
func nodeKey(cluster, id string) string { return prefix(cluster) + "nodes/" + id }
func leaderPrefix(cluster string) string {
	return prefix(cluster) + "leader/"
}
func electionKey(cluster string, shard int) string {
	return fmt.Sprintf("%s%d", leaderPrefix(cluster), shard)
}

// ReadDoc returns the cluster's topology document and its mod revision.
func ReadDoc(ctx context.Context, cli *clientv3.Client, cluster string) (*Doc, int64, error) {
	resp, err := cli.Get(ctx, topologyKey(cluster))
	if err != nil {
		return nil, 0, err
	}
	if len(resp.Kvs) == 0 {
		return nil, 0, ErrNoDoc
	}
	d, err := ParseDoc(resp.Kvs[0].Value)
	if err != nil {
		return nil, 0, err
	}
	return d, resp.Kvs[0].ModRevision, nil
}

// CreateDoc writes d as the cluster's first topology document; it fails
// with ErrDocExists when there is one.
func CreateDoc(ctx context.Context, cli *clientv3.Client, cluster string, d *Doc) error {
	if err := d.Validate(); err != nil {
		return err
	}
	key := topologyKey(cluster)
	resp, err := cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(d.Marshal()))).
		Commit()
	if err != nil {
		return err
	}
	if !resp.Succeeded {
		return ErrDocExists
	}
	return nil
}

// UpdateDoc applies change to the current document and writes the result
// only if nobody wrote the document in between (compare-and-swap on its
// mod revision), retrying a few times on a lost race. change may refuse
// with an error, which UpdateDoc returns. It returns the written document.
func UpdateDoc(ctx context.Context, cli *clientv3.Client, cluster string, change func(*Doc) error) (*Doc, error) {
	d, _, err := updateDoc(ctx, cli, cluster, change)
	return d, err
}

// updateDoc is UpdateDoc that also returns the revision it wrote.
func updateDoc(ctx context.Context, cli *clientv3.Client, cluster string, change func(*Doc) error) (*Doc, int64, error) {
	key := topologyKey(cluster)
	for range 10 {
		d, rev, err := ReadDoc(ctx, cli, cluster)
		if err != nil {
			return nil, 0, err
		}
		if err := change(d); err != nil {
			return nil, 0, err
		}
		if err := d.Validate(); err != nil {
			return nil, 0, err
		}
		resp, err := cli.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).
			Then(clientv3.OpPut(key, string(d.Marshal()))).
			Commit()
		if err != nil {
			return nil, 0, err
		}
		if resp.Succeeded {
			return d, resp.Header.Revision, nil
		}
	}
	return nil, 0, ErrConflict
}

// MoveSlots gives the slots first..last to shard to in two compare-and-swap
// steps, so that no two nodes ever serve one of them at once: first the
// slots are taken from their shard (nobody serves them), then, once every
// live node reports (in its registration) that it routes by that document
// or its registration is gone, they are given to the new shard. The slots
// answer CLUSTERDOWN in between (about one watch round trip). When a node
// does not confirm before ctx ends the slots are left unowned and the
// error says so: run it again to finish.
func MoveSlots(ctx context.Context, cli *clientv3.Client, cluster string, first, last, to int) (*Doc, error) {
	_, rev, err := updateDoc(ctx, cli, cluster, func(d *Doc) error {
		if to < 0 || to >= len(d.Shards) || len(d.Shards[to].Members) == 0 {
			return fmt.Errorf("%w: shard %d does not exist or has no members", ErrBadCommand, to)
		}
		c := *d
		c.Shards = append([]Shard(nil), d.Shards...)
		if err := c.MoveSlots(first, last, to); err != nil { // the final document must be valid
			return err
		}
		d.Unassign(first, last)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := waitApplied(ctx, cli, cluster, rev); err != nil {
		return nil, fmt.Errorf("slots %d-%d are unowned until every node confirms (%w): run move-slots again to finish", first, last, err)
	}
	return UpdateDoc(ctx, cli, cluster, func(d *Doc) error { return d.MoveSlots(first, last, to) })
}

// waitApplied waits until every registered node reports a document
// revision of at least rev.
func waitApplied(ctx context.Context, cli *clientv3.Client, cluster string, rev int64) error {
	for {
		resp, err := cli.Get(ctx, prefix(cluster)+"nodes/", clientv3.WithPrefix())
		if err != nil {
			return err
		}
		var pending []string
		for _, kv := range resp.Kvs {
			var r registration
			if json.Unmarshal(kv.Value, &r) != nil || r.DocRev < rev {
				pending = append(pending, strings.TrimPrefix(string(kv.Key), prefix(cluster)+"nodes/"))
			}
		}
		if len(pending) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not confirmed by %s: %w", strings.Join(pending, ", "), ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}
