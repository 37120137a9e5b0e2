package bgtask

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/internal/memstore"
	"github.com/bgtask/bgtask/store"
)

// endSignalStore is a Store (not the Manager's own in-memory one, so each
// Task keeps a private record) that closes ended once a terminal record's
// commit has returned.
type endSignalStore struct {
	store.Store
	once  sync.Once
	ended chan struct{}
}

func (s *endSignalStore) Commit(ctx context.Context, owner string, actions ...store.Action) error {
	err := s.Store.Commit(ctx, owner, actions...)
	for _, a := range actions {
		for _, u := range a.Tasks {
			if a.Op == store.OpUpsert && u.Status.IsTerminal() {
				s.once.Do(func() { close(s.ended) })
			}
		}
	}
	return err
}

// With a Store other than the in-memory one, a foreground task whose
// function returns while its call is being promoted ends in the background
// without taking the Manager's lock (it sees the promotion), and writes its
// private record meanwhile. The promotion reads that record before it
// marks the task promoted, so the read and the end's write never overlap
// (the race detector caught them overlapping in the reference server) and
// the notice says running, the status the task had when promoted.
func TestForegroundTiePrivateRecord(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const d = time.Second
		st := &endSignalStore{Store: memstore.New(), ended: make(chan struct{})}
		m := newTestManager(t, WithStore(st))
		o := m.Owner("alice")
		ib, err := o.Inbox()
		if err != nil {
			t.Fatal(err)
		}
		release := make(chan struct{})
		hook := func(hm *Manager, id string) {
			if hm != m {
				return // another test's Manager
			}
			close(release) // the function returns now, while the call is promoted
			<-st.ended     // and its end is committed (its private record written next)
		}
		whilePromoting.Store(&hook)
		defer whilePromoting.Store(nil)
		res, err := o.Foreground(t.Context(), d, func(context.Context, *Task) (any, error) {
			<-release
			return "late", nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if !res.Promoted || res.Status != bgtype.StatusRunning || string(res.Result) != notice(res.TaskID, bgtype.StatusRunning, d) {
			t.Fatalf("Foreground = %+v, notice %s; want promoted with status running", res, res.Result)
		}
		if meta, err := m.Wait(t.Context(), res.TaskID); err != nil || meta.Status != bgtype.StatusCompleted {
			t.Fatalf("Wait = %s, %v; want completed", meta.Status, err)
		}
		if evs := ib.Drain(); len(evs) != 1 || evs[0].Kind != bgtype.EventCompleted || evs[0].TaskID != res.TaskID {
			t.Fatalf("events %+v, want its completion once", evs)
		}
	})
}
