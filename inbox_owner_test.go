package bgtask

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
)

// A completion that races the end of a run reaches the closed inbox's
// fallback exactly once, never a fresh inbox nobody drains (awaken's lost
// wakeup, D6).
func TestOwnerInboxClosedBeforeCompletionFallsBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, err := New()
		if err != nil {
			t.Fatal(err)
		}
		var (
			mu  sync.Mutex
			got []Event
		)
		run := NewInbox(OnClosed(func(ev Event) {
			mu.Lock()
			got = append(got, ev)
			mu.Unlock()
		}))
		if _, err := m.BindInbox("thread-1", run); err != nil {
			t.Fatal(err)
		}
		release := make(chan struct{})
		id, err := m.Owner("thread-1").Spawn(t.Context(), func(ctx context.Context, _ *Task) (any, error) {
			<-release
			return "late", nil
		})
		if err != nil {
			t.Fatal(err)
		}
		run.Close() // the run ends while the task is still running
		close(release)
		if _, err := m.Wait(t.Context(), id); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		if len(got) != 1 || got[0].Kind != EventCompleted || got[0].TaskID != id || string(got[0].Result) != `"late"` {
			t.Fatalf("fallback got %+v, want one completed event for %s", got, id)
		}
		mu.Unlock()
		// The closed inbox is forgotten once the owner has no live task.
		m.inboxMu.RLock()
		_, bound := m.inboxes["thread-1"]
		m.inboxMu.RUnlock()
		if bound {
			t.Fatal("closed inbox of an idle owner is still bound")
		}
		if err := m.Shutdown(t.Context()); err != nil {
			t.Fatal(err)
		}
	})
}

// Events of a sub-agent's own tasks that arrive after the sub-agent ended go
// up to the sub-agent's owner.
func TestSubAgentLateChildEventsGoToItsOwner(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, err := New()
		if err != nil {
			t.Fatal(err)
		}
		release := make(chan struct{})
		childID := make(chan string, 1)
		agentID, err := m.Owner("thread-1").SpawnAgent(t.Context(), func(ctx context.Context, self *Task) (any, error) {
			id, err := self.Agent().Spawn(ctx, func(context.Context, *Task) (any, error) {
				<-release
				return 7, nil
			})
			childID <- id
			return nil, err
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.Wait(t.Context(), agentID); err != nil {
			t.Fatal(err)
		}
		child := <-childID
		meta, err := m.Get(t.Context(), child)
		if err != nil || meta.Owner != agentID || meta.Parent.TaskID != agentID {
			t.Fatalf("child record %+v, %v: want owner and parent %s", meta, err, agentID)
		}
		close(release)
		if _, err := m.Wait(t.Context(), child); err != nil {
			t.Fatal(err)
		}
		ib, _ := m.Inbox("thread-1")
		var kinds []string
		for _, ev := range ib.Drain() {
			kinds = append(kinds, string(ev.Kind)+":"+ev.TaskID)
		}
		want := []string{"completed:" + agentID, "completed:" + child}
		if len(kinds) != 2 || kinds[0] != want[0] || kinds[1] != want[1] {
			t.Fatalf("owner inbox %v, want %v", kinds, want)
		}
		if err := m.Shutdown(t.Context()); err != nil {
			t.Fatal(err)
		}
	})
}
