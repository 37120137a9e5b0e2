package bgtask

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/bgtask/bgtask/internal/memstore"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"
)

// lostAck is a store whose next insert fails: after committing it (the
// reply was lost: the outcome is unknown to the caller) or before.
type lostAck struct {
	*memstore.Store
	mu        sync.Mutex
	fail      bool // the next insert fails
	committed bool // ... after it was committed
}

func (l *lostAck) Commit(ctx context.Context, owner string, actions ...store.Action) error {
	l.mu.Lock()
	fail := l.fail && len(actions) == 1 && actions[0].Op == store.OpUpsert && actions[0].Tasks[0].Status == bgtype.StatusRunning
	if fail {
		l.fail = false
	}
	l.mu.Unlock()
	if !fail {
		return l.Store.Commit(ctx, owner, actions...)
	}
	if l.committed {
		if err := l.Store.Commit(ctx, owner, actions...); err != nil {
			return err
		}
	}
	return errors.New("connection reset")
}

// A spawn whose first commit fails, and may have been committed, leaves no
// record before it returns its error: nothing stays running that no one
// runs, and nothing is announced (the error told the caller).
func TestSpawnUnknownOutcomeEndsTheRecord(t *testing.T) {
	for _, committed := range []bool{true, false} {
		t.Run(map[bool]string{true: "committed", false: "not committed"}[committed], func(t *testing.T) {
			ls := &lostAck{Store: memstore.New(), fail: true, committed: committed}
			m := newTestManager(t, WithStore(ls))
			ran := false
			_, err := m.Owner("thread-1").Spawn(t.Context(), func(context.Context, *Task) (any, error) { ran = true; return nil, nil }, WithName("lost"))
			if err == nil || err.Error() != "bgtask: spawn: commit: connection reset" {
				t.Fatalf("Spawn = %v, want the commit's error", err)
			}
			var got []bgtype.TaskMeta
			for meta, err := range ls.List(t.Context(), "thread-1") {
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, meta)
			}
			if len(got) != 0 {
				t.Fatalf("store holds %d records (%s), want none", len(got), got[0].Status)
			}
			if ran {
				t.Fatal("the function ran")
			}
			// The name is free again: the failed spawn holds nothing.
			if _, err := m.Owner("thread-1").Spawn(t.Context(), func(context.Context, *Task) (any, error) { return nil, nil }, WithName("lost")); err != nil {
				t.Fatalf("Spawn again with the name: %v", err)
			}
		})
	}
}
