package main

import (
	"testing"

	"github.com/celld/celld/config"
	"github.com/celld/celld/server"
	"github.com/celld/celld/sidecar"
)

// TestSidecarBusyPollDefault: a sidecar's event loops never busy-poll
// unless --busy-poll (or CELLD_BUSY_POLL) is given; a given value, even
// the default's, is kept; a server that is not a sidecar keeps it too.
func TestSidecarBusyPollDefault(t *testing.T) {
	sc, err := sidecar.New(sidecar.Config{Seeds: []string{"127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	noEnv := func(string) (string, bool) { return "", false }
	for _, tc := range []struct {
		args []string
		side bool
		want int64 // srvCfg.BusyPoll in µs; -1: never
	}{
		{[]string{"--upstream", "127.0.0.1:1"}, true, -1},
		{[]string{"--upstream", "127.0.0.1:1", "--busy-poll", "50us"}, true, 50},
		{[]string{"--upstream", "127.0.0.1:1", "--busy-poll", "200us"}, true, 200},
		{nil, false, 50},
	} {
		cfg, err := config.Parse(tc.args, noEnv)
		if err != nil {
			t.Fatal(err)
		}
		srvCfg := server.Config{BusyPoll: cfg.BusyPoll}
		var s *sidecar.Sidecar
		if tc.side {
			s = sc
		}
		wireSidecar(s, cfg, &srvCfg)
		got := srvCfg.BusyPoll.Microseconds()
		if srvCfg.BusyPoll < 0 {
			got = -1
		}
		if got != tc.want {
			t.Errorf("%v: busy-poll %v, want %dµs (-1: never)", tc.args, srvCfg.BusyPoll, tc.want)
		}
	}
}
