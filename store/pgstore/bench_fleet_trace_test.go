package pgstore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"
	"github.com/bgtask/bgtask/store/pgstore"
	"github.com/bgtask/bgtask/store/pgstore/pgtest"
)

// timedStore is a Store that stamps, by task id, when each commit that
// made a record terminal began and returned, and when each Get began and
// returned. Every other method is the Store's.
type timedStore struct {
	*pgstore.Store
	commits sync.Map // task id -> [2]time.Time
	gets    sync.Map // task id -> [2]time.Time
}

func (t *timedStore) Commit(ctx context.Context, owner string, actions ...store.Action) error {
	t0 := time.Now()
	err := t.Store.Commit(ctx, owner, actions...)
	for _, a := range actions {
		for _, m := range a.Tasks {
			if m.Status.IsTerminal() {
				t.commits.Store(m.ID, [2]time.Time{t0, time.Now()})
			}
		}
	}
	return err
}

func (t *timedStore) Get(ctx context.Context, id string) (bgtype.TaskMeta, error) {
	t0 := time.Now()
	m, err := t.Store.Get(ctx, id)
	t.gets.Store(id, [2]time.Time{t0, time.Now()})
	return m, err
}

// BenchmarkFleetWakeTrace is BenchmarkFleet's wake with notifications,
// two instances, cut into its steps (issue 35 §3): A's commit of the end
// (commit), from its start to B's listener hearing the NOTIFY (heard), B's
// read of the record (read), and the handoffs in Go between them (go: the
// end to the commit, the notification to the read, the read to OnWake).
// A sample whose end was committed by another path than Commit (none
// here, but a Store may) is left out of the steps.
//
//	go test -run '^$' -bench BenchmarkFleetWakeTrace -benchtime 400x ./store/pgstore
func BenchmarkFleetWakeTrace(b *testing.B) {
	dsn := pgtest.NewDSN(b)
	var stores [2]*timedStore
	var ms [2]*bgtask.Manager
	for i := range 2 {
		s, err := pgstore.Open(b.Context(), dsn, pgstore.WithPollInterval(time.Hour))
		if err != nil {
			b.Fatal(err)
		}
		stores[i] = &timedStore{Store: s}
		m, err := bgtask.New(bgtask.WithStore(stores[i]), bgtask.WithInstance([]string{"inst_a", "inst_b"}[i]))
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Start(b.Context(), m.Runtime()); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() {
			m.Shutdown(context.Background())
			s.Close()
		})
		ms[i] = m
	}
	var ends, heard sync.Map // task id -> time.Time
	stop := stores[1].OnSettled(func(id, _ string) { heard.LoadOrStore(id, time.Now()) })
	defer stop()
	woken := make(chan string, 16)
	r, err := ms[1].NewReceiver("alice", bgtask.ReceiverConfig{OnWake: func(ev bgtype.Event) {
		if ev.Kind.IsTerminal() {
			woken <- ev.TaskID
		}
	}})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close(context.Background())
	var commit, notified, read, handoffs, wake latencies
	b.ReportAllocs()
	for b.Loop() {
		id, err := ms[0].Owner("alice").Spawn(b.Context(), func(_ context.Context, t *bgtask.Task) (any, error) {
			ends.Store(t.ID(), time.Now())
			return "ok", nil
		})
		if err != nil {
			b.Fatal(err)
		}
		for got := <-woken; got != id; got = <-woken {
		}
		now := time.Now()
		e, _ := ends.Load(id)
		end := e.(time.Time)
		wake.add(now.Sub(end))
		c, okc := stores[0].commits.Load(id)
		h, okh := heard.Load(id)
		g, okg := stores[1].gets.Load(id)
		if !okc || !okh || !okg {
			continue
		}
		ct, ht, gt := c.([2]time.Time), h.(time.Time), g.([2]time.Time)
		commit.add(ct[1].Sub(ct[0]))
		notified.add(ht.Sub(ct[0]))
		read.add(gt[1].Sub(gt[0]))
		handoffs.add(ct[0].Sub(end) + gt[0].Sub(ht) + now.Sub(gt[1]))
	}
	wake.report(b, "wake")
	commit.report(b, "commit")
	notified.report(b, "heard")
	read.report(b, "read")
	handoffs.report(b, "go")
}
