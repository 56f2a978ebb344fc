package ha

import (
	"context"
	"fmt"

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
	key := topologyKey(cluster)
	for range 10 {
		d, rev, err := ReadDoc(ctx, cli, cluster)
		if err != nil {
			return nil, err
		}
		if err := change(d); err != nil {
			return nil, err
		}
		if err := d.Validate(); err != nil {
			return nil, err
		}
		resp, err := cli.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).
			Then(clientv3.OpPut(key, string(d.Marshal()))).
			Commit()
		if err != nil {
			return nil, err
		}
		if resp.Succeeded {
			return d, nil
		}
	}
	return nil, ErrConflict
}
