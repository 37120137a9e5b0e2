package bgtask

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bgtask/bgtask/internal/memstore"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/internal/clock"
	"github.com/bgtask/bgtask/store"
)

// livenessStore is a MemoryStore that knows which instances are alive.
type livenessStore struct {
	*memstore.Store
	alive map[string]bool
	err   error
	asked []string
}

func (s *livenessStore) InstanceAlive(_ context.Context, instance string) (bool, error) {
	s.asked = append(s.asked, instance)
	return s.alive[instance], s.err
}

// With a Store that tells live instances apart, Restore interrupts the
// records of gone instances and of its own that it does not run, and leaves
// those of a live instance running, asking once per instance; an error of
// the st ends Restore with nothing touched.
func TestRestoreLeavesLiveInstances(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		alive       map[string]bool
		err         error
		interrupted []string
		wantErr     string
	}{
		{name: "all gone", interrupted: []string{"task_1_gone", "task_2_live", "task_3_gone", "task_4_mine"}},
		{name: "one alive", alive: map[string]bool{"inst_live": true}, interrupted: []string{"task_1_gone", "task_3_gone", "task_4_mine"}},
		{name: "error", err: errors.New("probe failed"), wantErr: `bgtask: restore: is instance "inst_gone" alive: probe failed`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				st := &livenessStore{Store: memstore.New(), alive: tc.alive, err: tc.err}
				at := clock.Now()
				for i, r := range []struct{ id, instance string }{
					{"task_1_gone", "inst_gone"}, {"task_2_live", "inst_live"}, {"task_3_gone", "inst_gone"}, {"task_4_mine", "inst_me"},
				} {
					meta := bgtype.TaskMeta{ID: r.id, Owner: "a", Type: bgtype.TypeTask, Status: bgtype.StatusRunning, CreatedAt: at.Add(time.Duration(i-10) * time.Minute), Instance: r.instance}
					if err := st.Commit(t.Context(), "a", store.UpsertAction(meta)); err != nil {
						t.Fatal(err)
					}
				}
				m := newTestManager(t, WithStore(st), WithInstance("inst_me"))
				got, err := m.Restore(t.Context(), "a")
				if tc.wantErr != "" {
					if err == nil || err.Error() != tc.wantErr || len(got) != 0 {
						t.Fatalf("Restore = %v, %v; want nothing and %q", got, err, tc.wantErr)
					}
				} else if err != nil {
					t.Fatal(err)
				}
				var ids []string
				for _, meta := range got {
					ids = append(ids, meta.ID)
				}
				if !slices.Equal(ids, tc.interrupted) {
					t.Fatalf("Restore interrupted %v, want %v", ids, tc.interrupted)
				}
				for _, id := range []string{"task_1_gone", "task_2_live", "task_3_gone", "task_4_mine"} {
					meta, err := m.Get(t.Context(), id)
					want := bgtype.StatusRunning
					if slices.Contains(tc.interrupted, id) {
						want = bgtype.StatusInterrupted
					}
					if err != nil || meta.Status != want {
						t.Fatalf("%s: %q, %v; want %q", id, meta.Status, err, want)
					}
				}
				wantAsked := []string{"inst_gone", "inst_live"}
				if tc.err != nil {
					wantAsked = wantAsked[:1]
				}
				if !slices.Equal(st.asked, wantAsked) {
					t.Fatalf("asked about %v, want %v (once each, never its own)", st.asked, wantAsked)
				}
				shutdownManager(t, m)
			})
		})
	}
}

// An end that another live instance committed is that instance's to
// announce (it delivered the event itself): Restore leaves it until the
// st reports the instance gone, then announces it once.
func TestRestoreLeavesLiveInstancesEnds(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st := &livenessStore{Store: memstore.New(), alive: map[string]bool{"inst_live": true}}
		at := clock.Now()
		for i, r := range []struct{ id, instance string }{{"task_1_live", "inst_live"}, {"task_2_gone", "inst_gone"}} {
			meta := bgtype.TaskMeta{ID: r.id, Owner: "a", Type: bgtype.TypeTask, Status: bgtype.StatusCompleted, CreatedAt: at.Add(time.Duration(i-10) * time.Minute),
				StartedAt: at.Add(-time.Minute), FinishedAt: at, Instance: r.instance}
			if err := st.Commit(t.Context(), "a", store.UpsertAction(meta)); err != nil {
				t.Fatal(err)
			}
		}
		m := newTestManager(t, WithStore(st), WithInstance("inst_me"))
		ib, err := m.Owner("a").Inbox()
		if err != nil {
			t.Fatal(err)
		}
		ended := func() (ids []string) {
			for _, ev := range ib.Drain() {
				if ev.Kind.IsTerminal() {
					ids = append(ids, ev.TaskID)
				}
			}
			return ids
		}
		if _, err := m.Restore(t.Context(), "a"); err != nil {
			t.Fatal(err)
		}
		if got := ended(); !slices.Equal(got, []string{"task_2_gone"}) {
			t.Fatalf("first Restore announced %v, want [task_2_gone] (the live instance's end is its own)", got)
		}
		st.alive = nil // the other process is gone
		if _, err := m.Restore(t.Context(), "a"); err != nil {
			t.Fatal(err)
		}
		if got := ended(); !slices.Equal(got, []string{"task_1_live"}) {
			t.Fatalf("second Restore announced %v, want [task_1_live] once", got)
		}
		shutdownManager(t, m)
	})
}
