package compat_test

import (
	"context"
	"strings"
	"testing"
)

// In cluster mode a script may only touch keys this node serves: a
// redis.call on another node's key raises Redis's error instead of reading
// or writing a key the node does not own.
func TestClusterScriptKeys(t *testing.T) {
	nodes := startClusterNodes(t, 3)
	plain := clusterPlain(t, nodes)
	ctx := context.Background()
	var local, remote string
	for i := 0; local == "" || remote == ""; i++ {
		k := "sk" + strings.Repeat("x", i%7) + string(rune('a'+i%26))
		switch clusterOwner(k, 3) {
		case 0:
			if local == "" {
				local = k
			}
		default:
			if remote == "" {
				remote = k
			}
		}
	}
	const body = "return redis.call('cl.throttle', ARGV[1], 9, 10, 3600)"
	// The EVAL declares a local key (so it is routed here) but touches a
	// remote one.
	_, err := plain[0].Eval(ctx, body, []string{local}, remote).Result()
	if err == nil || !strings.Contains(err.Error(), "Script attempted to access a non local key in a cluster node") {
		t.Fatalf("script touching remote key %q: err %v", remote, err)
	}
	if _, ok := nodes[0].Store.Get([]byte(remote), nodes[0].Now()/1e6); ok {
		t.Fatalf("the remote key was written on the wrong node")
	}
	got, err := plain[0].Eval(ctx, body, []string{local}, local).Int64Slice()
	if err != nil || len(got) != 5 || got[0] != 0 {
		t.Fatalf("script on a local key: %v %v", got, err)
	}
}
