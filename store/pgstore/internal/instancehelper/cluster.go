package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/store/pgstore"
)

// timedStore is the Store with every Commit's duration recorded, by
// kind: spawns (upserts of queued or running records only), completions
// (an upsert of a terminal record) and the others.
type timedStore struct {
	*pgstore.Store
	mu  sync.Mutex
	lat [kinds][]time.Duration
}

const (
	kindSpawn = iota
	kindComplete
	kindOther
	kinds
)

func (s *timedStore) Commit(ctx context.Context, owner string, actions ...store.Action) error {
	start := time.Now()
	err := s.Store.Commit(ctx, owner, actions...)
	d := time.Since(start)
	k := commitKind(actions)
	s.mu.Lock()
	s.lat[k] = append(s.lat[k], d)
	s.mu.Unlock()
	return err
}

// commitKind tells a spawn's commit from a completion's and the others.
func commitKind(actions []store.Action) int {
	k := kindSpawn
	for _, a := range actions {
		if a.Op != store.OpUpsert {
			return kindOther
		}
		for _, t := range a.Tasks {
			switch {
			case t.Status.IsTerminal():
				k = kindComplete
			case t.Status != bgtype.StatusQueued && t.Status != bgtype.StatusRunning:
				return kindOther
			}
		}
	}
	return k
}

// take returns the durations recorded since the last take, by kind.
func (s *timedStore) take() [kinds][]time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.lat
	s.lat = [kinds][]time.Duration{}
	return out
}

// cluster runs the load of the "cluster" command and reports it.
// With rate > 0 it offers rate tasks/s (an open loop) instead of running
// workers loops per owner that each spawn a task and wait for it.
func cluster(ctx context.Context, m *bgtask.Manager, ts *timedStore, prefix string, d time.Duration, owners, workers int, rate float64) string {
	ts.take()
	var (
		tasks, children, other atomic.Int64
		seq                    atomic.Int64
		mu                     sync.Mutex
		problem                = "ok"
		spawned                = map[string]bool{}
		childIDs               = map[string]bool{}
		notices                = map[string]int{}
	)
	note := func(msg string) {
		mu.Lock()
		if problem == "ok" {
			problem = msg
		}
		mu.Unlock()
	}
	short := func(context.Context, *bgtask.Task) (any, error) { return "ok", nil }
	long := func(ctx context.Context, _ *bgtask.Task) (any, error) {
		select {
		case <-time.After(100 * time.Millisecond):
			return "ok", nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	agent := func(ctx context.Context, t *bgtask.Task) (any, error) {
		ag, err := t.Agent()
		if err != nil {
			return nil, err
		}
		id, err := ag.Spawn(ctx, short)
		if err != nil {
			return nil, err
		}
		mu.Lock()
		childIDs[id] = true
		mu.Unlock()
		meta, err := ag.Wait(ctx, id)
		if err != nil {
			return nil, err
		}
		if meta.Status != bgtype.StatusCompleted {
			return nil, fmt.Errorf("child %s ended %s", id, meta.Status)
		}
		children.Add(1)
		return "ok", nil
	}
	drainCtx, stopDrain := context.WithCancel(ctx)
	defer stopDrain()
	var drainers, wg sync.WaitGroup
	inboxes := make([]*bgtask.Inbox, owners)
	count := func(evs []bgtype.Event) {
		mu.Lock()
		for _, ev := range evs {
			if ev.Kind.IsTerminal() {
				notices[ev.TaskID]++
			}
		}
		mu.Unlock()
	}
	deadline := time.Now().Add(d)
	start := time.Now()
	var runs []bgtask.Owner
	for k := range owners {
		o := m.Owner(fmt.Sprintf("%s_%d", prefix, k))
		ib, err := o.Inbox()
		if err != nil {
			return "cluster inbox: " + err.Error()
		}
		inboxes[k] = ib
		drainers.Go(func() {
			for ib.Wait(drainCtx) == nil {
				count(ib.Drain())
			}
		})
		runs = append(runs, o)
	}
	// one spawns a task of o, waits for it and counts the outcome.
	one := func(o bgtask.Owner) {
		var (
			id  string
			err error
		)
		switch seq.Add(1) % 10 {
		case 7:
			id, err = o.Spawn(ctx, long)
		case 9:
			id, err = o.SpawnAgent(ctx, agent)
		default:
			id, err = o.Spawn(ctx, short)
		}
		if err != nil {
			other.Add(1)
			note("spawn: " + err.Error())
			return
		}
		mu.Lock()
		spawned[id] = true
		mu.Unlock()
		meta, err := o.Wait(ctx, id)
		switch {
		case err != nil:
			other.Add(1)
			note("wait: " + err.Error())
		case meta.Status != bgtype.StatusCompleted:
			other.Add(1)
			note(fmt.Sprintf("%s ended %s: %s", id, meta.Status, meta.Error))
		default:
			tasks.Add(1)
		}
	}
	if rate > 0 {
		// Open loop: a task every 1/rate seconds, round robin over the
		// owners, whether the earlier ones finished or not.
		every := time.Duration(float64(time.Second) / rate)
		next := start
		for k := 0; next.Before(deadline); k++ {
			time.Sleep(time.Until(next))
			o := runs[k%len(runs)]
			wg.Go(func() { one(o) })
			next = next.Add(every)
		}
	} else {
		for _, o := range runs {
			for range workers {
				wg.Go(func() {
					for time.Now().Before(deadline) {
						one(o)
					}
				})
			}
		}
	}
	wg.Wait()
	elapsed := time.Since(start)
	// The terminal event follows the terminal record: give the last ones
	// a moment (a hang guard, not a measure).
	for range 200 {
		mu.Lock()
		n := len(notices)
		mu.Unlock()
		if n >= len(spawned) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	stopDrain()
	drainers.Wait()
	for _, ib := range inboxes {
		count(ib.Drain())
	}
	bad := 0
	for id := range spawned {
		if notices[id] != 1 {
			bad++
		}
	}
	strays := 0 // notices of tasks the owners did not spawn: their children's
	for id := range notices {
		if !spawned[id] {
			strays++
			if !childIDs[id] {
				bad++
			}
		}
	}
	byKind := ts.take()
	var lat []time.Duration
	for _, l := range byKind {
		lat = append(lat, l...)
	}
	q := func(lat []time.Duration, f float64) int64 {
		slices.Sort(lat)
		if len(lat) == 0 {
			return 0
		}
		return lat[int(f*float64(len(lat)-1))].Microseconds()
	}
	return fmt.Sprintf("cluster %d %d %d %d %d %d %d %d %d %d %d %d %d %s", tasks.Load(), children.Load(), other.Load(), bad,
		len(lat), q(lat, 0.5), q(lat, 0.99), elapsed.Milliseconds(), strays,
		q(byKind[kindSpawn], 0.5), q(byKind[kindSpawn], 0.99), q(byKind[kindComplete], 0.5), q(byKind[kindComplete], 0.99), problem)
}
