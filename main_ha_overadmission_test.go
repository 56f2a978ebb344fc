package main

import (
	"testing"
	"time"
)

// TestOverAdmissionReplay checks the harness's replay (overAdmission) on
// logs whose answer is known: a state lost in a failover (the whole burst
// admitted again) is counted in that fault's phase; admissions GCRA allows
// (a burst, then one per τ, some answered late as retried calls are) count
// 0; one admission past the burst counts 1.
func TestOverAdmissionReplay(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	adm := func(key string, sentMs, recvMs int) haAdmission { return haAdmission{key, at(sentMs), at(recvMs)} }
	const b, tau = 5, 6 * time.Second
	var ok []haAdmission
	for i := range 6 { // the burst
		ok = append(ok, adm("ok", i, i+1))
	}
	for i := 1; i <= 10; i++ { // then one per τ, every third answered 2.5 s late
		late := 1
		if i%3 == 0 {
			late = 2500
		}
		ok = append(ok, adm("ok", 5+i*6000, 5+i*6000+late))
	}
	var lost []haAdmission
	for i := range 4 {
		lost = append(lost, adm("lost", i, i+1)) // on the old leader
	}
	for i := range 6 {
		lost = append(lost, adm("lost", 2000+i, 2001+i)) // a full burst again on a leader that forgot
	}
	phases := []map[string][]haAdmission{{"ok": ok}, {"lost": lost, "ok": ok[:6]}}
	got := overAdmission(phases, []string{"steady", "kill -9 #1"}, b, tau)
	if len(got) != 2 || got[0].over != 0 || got[1].over != 4 || got[1].key != "lost" {
		t.Fatalf("got %+v, want steady 0 and kill -9 #1: lost 4", got)
	}
	if over := worstSpanExcess(append(ok[:6:6], adm("ok", 6, 7)), b, tau); over != 1 {
		t.Errorf("burst + 1 within τ counted %d over, want 1", over)
	}
}
