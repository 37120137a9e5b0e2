package bgtask

import (
	"context"
	"slices"
	"testing"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/internal/memstore"
	"github.com/bgtask/bgtask/internal/rectest"
	"github.com/bgtask/bgtask/store"
)

// A sub-agent's child that ends after the sub-agent is forwarded to the
// sub-agent's owner, and the owner's boundary marks the child's record
// announced under its own owner, the sub-agent: no owner is left with
// news after the hand-out (issue 30, item 1).
func TestForwardedChildEndMarkedAnnounced(t *testing.T) {
	ds := &durableMem{Store: memstore.New()}
	pr := newReceiverRun(t, WithStore(ds))
	release := make(chan struct{})
	childID := make(chan string, 1)
	agentID, err := pr.o.SpawnAgent(WithToolCall(t.Context(), ToolCall{RunID: "run-1", CallID: "call-1"}),
		func(ctx context.Context, tk *Task) (any, error) {
			ag, err := tk.Agent()
			if err != nil {
				return nil, err
			}
			id, err := ag.Spawn(ctx, func(context.Context, *Task) (any, error) {
				<-release
				return "child done", nil
			}, WithDetached())
			childID <- id
			return "agent done", err
		})
	if err != nil {
		t.Fatal(err)
	}
	child := <-childID
	if meta := waitTask(t, pr.o, agentID); meta.Status != bgtype.StatusCompleted {
		t.Fatalf("sub-agent %s", meta.Status)
	}
	close(release)
	if meta := waitTask(t, pr.m.Owner(agentID), child); meta.Status != bgtype.StatusCompleted {
		t.Fatalf("child %s", meta.Status)
	}
	var got []string
	for len(got) < 2 {
		if err := pr.p.WaitEvent(t.Context()); err != nil {
			t.Fatal(err)
		}
		evs, err := pr.p.Deliver(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, eventIDs(evs)...)
	}
	if want := []string{agentID, child}; !slices.Equal(got, want) {
		t.Fatalf("delivered ends %q, want %q", got, want)
	}
	if err := pr.p.RunEnd(t.Context(), RunOutcome{RunID: "run-1"}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{agentID, child} {
		if m, _ := ds.Get(t.Context(), id); !m.Announced {
			t.Errorf("%s (owner %s) not announced after its end was handed out", id, m.Owner)
		}
	}
	var owners []string
	for o, err := range pr.m.UndeliveredOwners(t.Context()) {
		if err != nil {
			t.Fatal(err)
		}
		owners = append(owners, o)
	}
	if len(owners) != 0 {
		t.Fatalf("UndeliveredOwners = %q after every end was handed out, want none", owners)
	}
}

// A process restarted with its instance id finds a sub-agent record its
// previous run left running, whose child ended unannounced: the owner with
// news is the sub-agent's live owner, not the dead sub-agent's id (issue
// 30, item 3).
func TestUndeliveredOwnersSkipsSubAgentLeftByPreviousRun(t *testing.T) {
	ds := &durableMem{Store: memstore.New()}
	agent := "task_0190a1b2c3d4e5f60718293a4b5c6d01"
	child := "task_0190a1b2c3d4e5f60718293a4b5c6d02"
	seedRecord(t, ds, rectest.With(rectest.Meta(agent, "thread-1", bgtype.StatusRunning), func(m *bgtype.TaskMeta) { m.Type = bgtype.TypeSubAgent }))
	seedRecord(t, ds, rectest.With(rectest.Meta(child, agent, bgtype.StatusCompleted), func(m *bgtype.TaskMeta) { m.Parent.TaskID = agent }))
	m := newTestManager(t, WithStore(ds), WithInstance("inst-1"))
	var owners []string
	for o, err := range m.UndeliveredOwners(t.Context()) {
		if err != nil {
			t.Fatal(err)
		}
		owners = append(owners, o)
	}
	if want := []string{"thread-1"}; !slices.Equal(owners, want) {
		t.Fatalf("UndeliveredOwners = %q, want %q", owners, want)
	}
}

// A sub-agent ended and its end was heard, but a child's end that reached
// its inbox after its loop's last drain was lost with the process: the
// owner's next run hears the child's end, once, and marks it under the
// sub-agent (issue 30, item 5).
func TestRestoreForwardsEndedSubAgentsLostChild(t *testing.T) {
	ds := &durableMem{Store: memstore.New()}
	agent := "task_0190a1b2c3d4e5f60718293a4b5c6d01"
	child := "task_0190a1b2c3d4e5f60718293a4b5c6d02"
	seedRecord(t, ds, rectest.With(rectest.Meta(agent, "thread-1", bgtype.StatusCompleted), func(m *bgtype.TaskMeta) { m.Type, m.Announced = bgtype.TypeSubAgent, true }))
	seedRecord(t, ds, rectest.With(rectest.Meta(child, agent, bgtype.StatusCompleted), func(m *bgtype.TaskMeta) { m.Parent.TaskID = agent }))
	pr := newReceiverRun(t, WithStore(ds), WithInstance("inst-2"))
	evs, err := pr.p.Deliver(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := eventIDs(evs), []string{child}; !slices.Equal(got, want) {
		t.Fatalf("first run delivered %q, want %q", got, want)
	}
	if err := pr.p.RunEnd(t.Context(), RunOutcome{RunID: "run-1"}); err != nil {
		t.Fatal(err)
	}
	if m, _ := ds.Get(t.Context(), child); !m.Announced {
		t.Fatal("child's end handed out but not announced")
	}
	if err := pr.p.RunStart(t.Context(), RunInfo{RunID: "run-2"}); err != nil {
		t.Fatal(err)
	}
	if evs, err := pr.p.Deliver(t.Context()); err != nil || len(evs) != 0 {
		t.Fatalf("second run delivered %q, %v; want nothing", eventIDs(evs), err)
	}
}

// seedRecord commits m, a record a previous run of instance "inst-1" left,
// under its owner.
func seedRecord(t *testing.T, ds *durableMem, m bgtype.TaskMeta) {
	t.Helper()
	m.Instance, m.CreatedAt = "inst-1", rectest.T0
	if m.Status.IsTerminal() {
		m.FinishedAt = rectest.T1
	}
	if err := ds.Commit(t.Context(), m.Owner, store.UpsertAction(m)); err != nil {
		t.Fatal(err)
	}
}
