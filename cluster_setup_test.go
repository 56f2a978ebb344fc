package main

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/celld/celld/cluster"
)

func TestSetupCluster(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	dir := t.TempDir()
	nodes := "127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003"

	cfg, err := parseFlags([]string{"--addr", "127.0.0.1:7002", "--dir", dir, "--cluster-nodes", nodes})
	if err != nil {
		t.Fatal(err)
	}
	topo, err := clusterTopology(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := recordClusterID(cfg, topo, log); err != nil {
		t.Fatal(err)
	}
	if topo.SelfIndex() != 1 || topo.Self().Slots[0] != (cluster.SlotRange{First: 5461, Last: 10921}) {
		t.Fatalf("self %d slots %v", topo.SelfIndex(), topo.Self().Slots)
	}
	b, err := os.ReadFile(filepath.Join(dir, cluster.IDFile))
	if err != nil || strings.TrimSpace(string(b)) != topo.Self().ID {
		t.Fatalf("%s = %q, %v; want %s", cluster.IDFile, b, err, topo.Self().ID)
	}

	// Environment defaults, with an announce address for a wildcard listener.
	t.Setenv("CELLD_CLUSTER_NODES", nodes)
	t.Setenv("CELLD_CLUSTER_ANNOUNCE", "127.0.0.1:7003")
	cfg, err = parseFlags([]string{"--addr", "0.0.0.0:6379", "--persist=false"})
	if err != nil {
		t.Fatal(err)
	}
	if topo, err = clusterTopology(cfg); err != nil || topo.SelfIndex() != 2 {
		t.Fatalf("announce: %v %v", topo, err)
	}

	for _, bad := range [][]string{
		{"--addr", "127.0.0.1:9999", "--persist=false"},                         // not in the list
		{"--addr", "127.0.0.1:7001", "--persist=false", "--cluster-nodes", "x"}, // bad list
	} {
		t.Setenv("CELLD_CLUSTER_ANNOUNCE", "")
		cfg, err := parseFlags(bad)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := clusterTopology(cfg); err == nil {
			t.Errorf("%v: accepted", bad)
		}
	}

	// Standalone: no topology; an announce address alone is a mistake.
	t.Setenv("CELLD_CLUSTER_NODES", "")
	cfg, _ = parseFlags([]string{"--persist=false"})
	if topo, err := clusterTopology(cfg); topo != nil || err != nil {
		t.Fatalf("standalone: %v %v", topo, err)
	}
	cfg.ClusterAnnounce = "127.0.0.1:7001"
	if _, err := clusterTopology(cfg); err == nil {
		t.Fatal("--cluster-announce without --cluster-nodes accepted")
	}
}
