package ha

import (
	"context"
	"testing"
	"time"

	"github.com/celld/celld/ha/etcdtest"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
)

func newClient(t *testing.T, e *etcdtest.Etcd) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: e.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// TestEtcdSessionElection proves the client (go.etcd.io/etcd/client/v3
// v3.7.x) against Debian's etcd 3.4 server: two sessions campaign, one
// leads; its session closing (lease revoked) hands leadership to the other,
// whose leader key has a higher revision (the epoch only grows).
func TestEtcdSessionElection(t *testing.T) {
	e := etcdtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	c1, c2 := newClient(t, e), newClient(t, e)
	s1, err := concurrency.NewSession(c1, concurrency.WithTTL(2))
	if err != nil {
		t.Fatal(err)
	}
	s2, err := concurrency.NewSession(c2, concurrency.WithTTL(2))
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	e1 := concurrency.NewElection(s1, "/test/election")
	e2 := concurrency.NewElection(s2, "/test/election")
	if err := e1.Campaign(ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	rev1 := e1.Rev()
	won2 := make(chan error, 1)
	go func() { won2 <- e2.Campaign(ctx, "n2") }()

	leader, err := e1.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(leader.Kvs[0].Value); got != "n1" {
		t.Fatalf("leader = %q, want n1", got)
	}
	select {
	case err := <-won2:
		t.Fatalf("second campaign returned while the first leads: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	if err := s1.Close(); err != nil { // revokes the lease: the leader key goes
		t.Fatal(err)
	}
	if err := <-won2; err != nil {
		t.Fatal(err)
	}
	if e2.Rev() <= rev1 {
		t.Fatalf("new leader's revision %d not above the old one's %d", e2.Rev(), rev1)
	}
	leader, err = e2.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(leader.Kvs[0].Value); got != "n2" {
		t.Fatalf("leader = %q, want n2", got)
	}
}
