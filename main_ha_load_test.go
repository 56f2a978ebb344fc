package main

import (
	"context"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// haDoer is what the HA load calls through: a go-redis Client (plain, as
// through a sidecar) or ClusterClient.
type haDoer interface {
	Do(ctx context.Context, args ...any) *redis.Cmd
}

// haLoad is the HA process tests' client load: four goroutines calling
// CL.THROTTLE (the harness's limit: burst haBurst, 10 per 10τ) on keys
// "user<n>:<phase>", n < 200, each admission logged with its send and
// answer times under the phase it was sent in. newPhase gives every later
// call fresh keys, so each key's history holds one fault, which
// overAdmission then replays.
//
// The goroutines run until ctx ends; wait for them with wg. ok and failed
// count answered and failed calls (a failure after ctx ended is not
// counted). mu guards phases and names, and is held around onAnswer.
type haLoad struct {
	phase      atomic.Int32
	ok, failed atomic.Int64
	wg         sync.WaitGroup

	mu     sync.Mutex
	phases []map[string][]haAdmission
	names  []string
}

// startHALoad starts the load: goroutine g calls through clients[g] and
// draws its keys from a PCG seeded (g, seed). first names phase 0.
// onErr, if not nil, sees each counted failure (from the calling
// goroutine, without mu); onAnswer, if not nil, sees every answer
// (admitted or not) with mu held.
func startHALoad(ctx context.Context, clients [4]haDoer, seed uint64, first string,
	onErr func(error), onAnswer func(key string, sent, recv time.Time, admitted bool)) *haLoad {
	l := &haLoad{phases: []map[string][]haAdmission{{}}, names: []string{first}}
	for g, c := range clients {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), seed))
			for ctx.Err() == nil {
				ph := l.phase.Load()
				k := "user" + strconv.Itoa(r.IntN(200)) + ":" + strconv.Itoa(int(ph))
				sent := time.Now()
				res, err := c.Do(ctx, "CL.THROTTLE", k, haBurst, 10, int(10*haTau/time.Second)).Int64Slice()
				recv := time.Now()
				if err != nil {
					if ctx.Err() == nil {
						l.failed.Add(1)
						if onErr != nil {
							onErr(err)
						}
					}
					continue
				}
				l.ok.Add(1)
				admitted := res[0] == 0
				if !admitted && onAnswer == nil {
					continue
				}
				l.mu.Lock()
				if onAnswer != nil {
					onAnswer(k, sent, recv, admitted)
				}
				if admitted {
					l.phases[ph][k] = append(l.phases[ph][k], haAdmission{k, sent, recv})
				}
				l.mu.Unlock()
			}
		}()
	}
	return l
}

// newPhase starts a phase named name (later calls use fresh keys) and
// returns its index.
func (l *haLoad) newPhase(name string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.phases = append(l.phases, map[string][]haAdmission{})
	l.names = append(l.names, name)
	ph := len(l.phases) - 1
	l.phase.Store(int32(ph))
	return ph
}

// overAdmission replays every phase's admissions (overAdmission, under mu).
func (l *haLoad) overAdmission() []faultExcess {
	l.mu.Lock()
	defer l.mu.Unlock()
	return overAdmission(l.phases, l.names, haBurst, haTau)
}
