package bgtask

import (
	"context"
	"iter"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/internal/clock"
	"github.com/bgtask/bgtask/internal/memstore"
	"github.com/bgtask/bgtask/store"
)

// instanceStore is a MemoryStore that lists the owners of an instance's
// live records, as a SharedStore whose processes keep their instance id
// across restarts does.
type instanceStore struct{ *memstore.Store }

func (s instanceStore) InstanceOwners(ctx context.Context, instance string) iter.Seq2[string, error] {
	return func(yield func(string, error) bool) {
		seen := map[string]bool{}
		for _, owner := range []string{"thread-left", "thread-live", "thread-other", "task_agent_left"} {
			for meta, err := range s.List(ctx, owner, bgtype.StatusQueued, bgtype.StatusRunning, bgtype.StatusAwaitingInput) {
				if err != nil {
					yield("", err)
					return
				}
				if meta.Instance == instance && !seen[owner] {
					seen[owner] = true
					if !yield(owner, nil) {
						return
					}
				}
			}
		}
	}
}

// After a restart with the same instance id, WithOnPendingOwner is called
// once for an owner whose record the previous run left running (and, for
// a record of a sub-agent the previous run left, for that sub-agent's
// owner), never for an owner whose live record this Manager runs or that
// another instance runs.
func TestWithOnPendingOwnerLeftByThisInstance(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st := instanceStore{memstore.New()}
		at := clock.Now()
		for i, r := range []struct{ id, owner, instance, typ string }{
			{"task_1_left", "thread-left", "inst_me", bgtype.TypeTask},
			{"task_2_other", "thread-other", "inst_other", bgtype.TypeTask},
			{"task_agent_left", "thread-agent", "inst_me", bgtype.TypeSubAgent},
			{"task_3_child", "task_agent_left", "inst_me", bgtype.TypeTask},
		} {
			meta := bgtype.TaskMeta{ID: r.id, Owner: r.owner, Type: r.typ, Status: bgtype.StatusRunning, CreatedAt: at.Add(time.Duration(i-10) * time.Minute), StartedAt: at.Add(-time.Minute), Instance: r.instance}
			if err := st.Commit(t.Context(), r.owner, store.UpsertAction(meta)); err != nil {
				t.Fatal(err)
			}
		}
		calls := make(chan string, 16)
		release := make(chan struct{})
		m := newTestManager(t, WithStore(st), WithInstance("inst_me"), WithOnPendingOwner(func(owner string) { calls <- owner }))
		// A task of this run: its record is live and of this instance, but it runs here.
		if _, err := m.Owner("thread-live").Spawn(t.Context(), func(ctx context.Context, _ *Task) (any, error) {
			<-release
			return nil, nil
		}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		close(release)
		shutdownManager(t, m)
		close(calls)
		var got []string
		for o := range calls {
			got = append(got, o)
		}
		slices.Sort(got)
		if want := []string{"thread-agent", "thread-left"}; !slices.Equal(got, want) {
			t.Fatalf("called with %q, want each of %q once", got, want)
		}
	})
}
