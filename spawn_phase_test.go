package bgtask

import (
	"context"
	"sync"
	"testing"

	"github.com/bgtask/bgtask/internal/memstore"

	"github.com/bgtask/bgtask/store"
)

// phaseAtCommitStore records, at the first commit of each task, the
// phase the Manager has the task in.
type phaseAtCommitStore struct {
	*memstore.Store
	m      *Manager
	mu     sync.Mutex // guards phases
	phases map[string]taskPhase
}

func (s *phaseAtCommitStore) Commit(ctx context.Context, owner string, actions ...store.Action) error {
	s.mu.Lock()
	for _, a := range actions {
		for _, meta := range a.Tasks {
			if _, seen := s.phases[meta.ID]; !seen {
				s.m.mu.Lock()
				s.phases[meta.ID] = s.m.nodes[meta.ID].phase
				s.m.mu.Unlock()
			}
		}
	}
	s.mu.Unlock()
	return s.Store.Commit(ctx, owner, actions...)
}

// TestSpawnAdmittedRunsBeforeItsFirstCommit: a task that gets a slot at
// registration is running from the same critical section, so the spawner
// does not take the Manager's lock again after the first commit; a task
// that waits for a slot is still waiting when its queued record is
// committed.
func TestSpawnAdmittedRunsBeforeItsFirstCommit(t *testing.T) {
	store := &phaseAtCommitStore{Store: memstore.New(), phases: map[string]taskPhase{}}
	m := newTestManager(t, WithStore(store), WithLimits(Limits{MaxConcurrent: 1, QueueWhenFull: true}))
	store.m = m
	o := m.Owner("o")
	release := make(chan struct{})
	first, err := o.Spawn(t.Context(), func(ctx context.Context, _ *Task) (any, error) {
		<-release
		return nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	second, err := o.Spawn(t.Context(), func(context.Context, *Task) (any, error) { return nil, nil })
	if err != nil {
		t.Fatal(err)
	}
	close(release)
	for _, id := range []string{first, second} {
		waitTask(t, o, id)
	}
	store.mu.Lock()
	defer store.mu.Unlock()
	if got := store.phases[first]; got != phaseRunning {
		t.Errorf("admitted task at its first commit: phase %s, want running", got)
	}
	if got := store.phases[second]; got != phaseWaiting {
		t.Errorf("queued task at its first commit: phase %s, want waiting", got)
	}
}
