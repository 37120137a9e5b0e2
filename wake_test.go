package bgtask

import (
	"context"
	"errors"
	"slices"
	"testing"
)

// TestWakePolicies: which of a task's events reach its owner's inbox under
// each policy. Messages addressed to the owner always do.
func TestWakePolicies(t *testing.T) {
	for _, tc := range []struct {
		wake WakePolicy
		want []string
	}{
		{"", []string{"custom:agent_message", "completed"}},
		{WakeOnTerminal, []string{"custom:agent_message", "completed"}},
		{WakeSilent, []string{"custom:agent_message"}},
		{WakeOnActivity, []string{"custom:progress", "custom:agent_message", "input_requested", "completed"}},
	} {
		t.Run(tc.wake.String(), func(t *testing.T) {
			m := mtNew(t)
			o := m.Owner("thread-1")
			id, err := o.Spawn(t.Context(), func(ctx context.Context, tk *Task) (any, error) {
				if err := tk.Emit("progress", 50); err != nil {
					return nil, err
				}
				if err := tk.Emit(EventTypeMessage, Message{From: tk.ID(), Content: "half way"}); err != nil {
					return nil, err
				}
				if _, err := tk.RequestInput(ctx, "go on?"); err != nil {
					return nil, err
				}
				return "done", nil
			}, WithWake(tc.wake))
			if err != nil {
				t.Fatal(err)
			}
			meta, err := m.waitSettled(t.Context(), ownerReach("thread-1"), id)
			if err != nil || meta.Status != StatusAwaitingInput {
				t.Fatalf("waitSettled: %+v, %v", meta, err)
			}
			if err := o.Send(t.Context(), id, Message{Content: "yes", InReplyTo: meta.Input.ID}); err != nil {
				t.Fatal(err)
			}
			if got := mtWait(t, o, id); got.Status != StatusCompleted || got.Wake != tc.wake {
				t.Fatalf("record %s, wake %q", got.Status, got.Wake)
			}
			var got []string
			for _, ev := range mtDrain(t, o) {
				k := string(ev.Kind)
				if ev.Kind == EventCustom {
					k += ":" + ev.EventType
				}
				if ev.TaskID != id {
					t.Fatalf("event of %s", ev.TaskID)
				}
				got = append(got, k)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("events %v, want %v", got, tc.want)
			}
		})
	}
}

// TestWakeSilentCommitFailure: even a silent task reports a terminal record
// that could not be committed.
func TestWakeSilentCommitFailure(t *testing.T) {
	store := &mtFailTerminalStore{Store: NewMemoryStore()}
	m := mtNew(t, WithStore(store), WithCommitRetry(1, 0))
	o := m.Owner("thread-1")
	id, err := o.Spawn(t.Context(), func(context.Context, *Task) (any, error) { return 1, nil }, WithWake(WakeSilent))
	if err != nil {
		t.Fatal(err)
	}
	ib, _ := o.Inbox()
	if err := ib.Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	// Wait reports the record the store kept (running), as nothing else ends it.
	if _, err := o.Wait(t.Context(), id); err != nil && !errors.Is(err, ErrNotLive) {
		t.Fatal(err)
	}
	if got := mtKinds(ib.Drain()); !slices.Equal(got, []EventKind{EventCommitFailed}) {
		t.Fatalf("events %v", got)
	}
}

// mtFailTerminalStore refuses to commit terminal records.
type mtFailTerminalStore struct{ Store }

func (s *mtFailTerminalStore) Commit(ctx context.Context, owner string, actions ...Action) error {
	for _, a := range actions {
		for _, tk := range a.Tasks {
			if tk.Status.IsTerminal() {
				return errors.New("disk full")
			}
		}
	}
	return s.Store.Commit(ctx, owner, actions...)
}

func TestWakeInvalid(t *testing.T) {
	m := mtNew(t)
	_, err := m.Owner("thread-1").Spawn(t.Context(), func(context.Context, *Task) (any, error) { return nil, nil }, WithWake("loud"))
	if !errors.Is(err, ErrInvalidWake) || err.Error() != `bgtask: invalid wake policy: "loud"` {
		t.Fatalf("spawn with an unknown policy: %v", err)
	}
	if n := len(mtList(t, m.Owner("thread-1"))); n != 0 {
		t.Fatalf("%d records", n)
	}
	for p, want := range map[WakePolicy]bool{"": true, WakeSilent: true, WakeOnTerminal: true, WakeOnActivity: true, "loud": false, "Silent": false} {
		if p.Valid() != want {
			t.Errorf("%q.Valid() = %v", p, !want)
		}
	}
}
