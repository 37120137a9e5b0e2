//go:build unix

package sqlitestore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/bgtype"
)

// newManagerOn makes a Manager on s for instance id, shut down at the end
// of the test (before s closes).
func newManagerOn(t *testing.T, s bgtask.Option, id string) *bgtask.Manager {
	t.Helper()
	m, err := bgtask.New(s, bgtask.WithInstance(id))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Shutdown(context.Background()); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return m
}

// Two Managers (as two processes) on one SQLite file: a wait, a message
// and an answer from B to a live task that A runs fail with an error that
// says the task runs in another process (ErrElsewhere), never "not running
// in this manager"; the mistakes a local call reports stay the same.
func TestCallsOnTaskOfAnotherProcess(t *testing.T) {
	sa, path := open(t)
	sb := openAt(t, path)
	a := newManagerOn(t, bgtask.WithStore(sa), "inst-a")
	b := newManagerOn(t, bgtask.WithStore(sb), "inst-b")
	oa, ob := a.Owner("alice"), b.Owner("alice")
	block := func(ctx context.Context, _ *bgtask.Task) (any, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	agent, err := oa.SpawnAgent(t.Context(), block)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := oa.Spawn(t.Context(), block)
	if err != nil {
		t.Fatal(err)
	}
	elsewhere := func(id string) string {
		return fmt.Sprintf(`bgtask: task runs in another process: %s runs on instance "inst-a"`, id)
	}
	for name, wait := range map[string]func(context.Context, string) (bgtype.TaskMeta, error){"Wait": ob.Wait, "WaitSettled": ob.WaitSettled} {
		got, err := wait(t.Context(), plain)
		if !errors.Is(err, bgtask.ErrElsewhere) || !errors.Is(err, bgtask.ErrNotLive) || err.Error() != elsewhere(plain) || got.Status != bgtype.StatusRunning {
			t.Errorf("B's %s = %s, %v; want the running record and %q", name, got.Status, err, elsewhere(plain))
		}
	}
	if _, err := ob.Send(t.Context(), agent, bgtype.Message{Content: "hi"}); !errors.Is(err, bgtask.ErrElsewhere) || !errors.Is(err, bgtask.ErrInboxClosed) || err.Error() != elsewhere(agent) {
		t.Errorf("B's Send to A's sub-agent = %v", err)
	}
	if _, err := ob.Send(t.Context(), plain, bgtype.Message{Content: "this", InReplyTo: "in_1"}); !errors.Is(err, bgtask.ErrElsewhere) || err.Error() != elsewhere(plain) {
		t.Errorf("B's answer to A's task = %v", err)
	}
	if _, err := ob.Send(t.Context(), plain, bgtype.Message{Content: "hi"}); !errors.Is(err, bgtask.ErrNotSubAgent) || err.Error() != "bgtask: task has no inbox (not a sub-agent): "+plain {
		t.Errorf("B's Send to A's plain task = %v", err)
	}
	if _, err := b.Owner("bob").Wait(t.Context(), plain); !errors.Is(err, bgtask.ErrNotFound) || err.Error() != "bgtask: task not found: "+plain {
		t.Errorf("bob's Wait = %v", err)
	}
	if _, err := b.Owner("bob").Send(t.Context(), agent, bgtype.Message{}); !errors.Is(err, bgtask.ErrNotFound) || err.Error() != "bgtask: task not found: "+agent {
		t.Errorf("bob's Send = %v", err)
	}
}
