package bgtask

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"

	"github.com/bgtask/bgtask/internal/memstore"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"
)

// TestWakePolicies: which of a task's events reach its owner's inbox under
// each policy, and which of them are quiet. Messages addressed to the owner
// always arrive; progress is kept on the task whatever the policy.
func TestWakePolicies(t *testing.T) {
	for _, tc := range []struct {
		wake bgtype.WakePolicy
		want []string
	}{
		{"", []string{"custom:progress quiet", "custom:agent_message", "input_requested", "completed"}},
		{bgtype.WakeOnTerminal, []string{"custom:progress quiet", "custom:agent_message", "input_requested", "completed"}},
		{bgtype.WakeSilent, []string{"custom:agent_message"}},
		{bgtype.WakeOnActivity, []string{"custom:progress", "custom:agent_message", "input_requested", "completed"}},
	} {
		t.Run(tc.wake.String(), func(t *testing.T) {
			m := newTestManager(t)
			o := m.Owner("thread-1")
			id, err := o.Spawn(t.Context(), func(ctx context.Context, tk *Task) (any, error) {
				if err := tk.Emit("progress", 50); err != nil {
					return nil, err
				}
				if err := tk.Emit(bgtype.EventTypeMessage, bgtype.Message{From: tk.ID(), Content: "half way"}); err != nil {
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
			if err != nil || meta.Status != bgtype.StatusAwaitingInput {
				t.Fatalf("waitSettled: %+v, %v", meta, err)
			}
			if p, ok := o.LatestEvent(id); !ok || p.EventType != "progress" || string(p.Payload) != "50" || p.Count != 1 || p.At.IsZero() {
				t.Fatalf("Progress = %+v, %v", p, ok)
			}
			if _, err := o.Send(t.Context(), id, bgtype.Message{Content: "yes", InReplyTo: meta.Input.ID}); err != nil {
				t.Fatal(err)
			}
			if got := waitTask(t, o, id); got.Status != bgtype.StatusCompleted || got.Wake != tc.wake {
				t.Fatalf("record %s, wake %q", got.Status, got.Wake)
			}
			var got []string
			for _, ev := range drainOwner(t, o) {
				k := string(ev.Kind)
				if ev.Kind == bgtype.EventCustom {
					k += ":" + ev.EventType
				}
				if ev.Quiet {
					k += " quiet"
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
	store := &failTerminalStore{Store: memstore.New()}
	m := newTestManager(t, WithStore(store), WithTuning(Tuning{CommitAttempts: 1, CommitBackoff: -1}))
	o := m.Owner("thread-1")
	id, err := o.Spawn(t.Context(), func(context.Context, *Task) (any, error) { return 1, nil }, WithWake(bgtype.WakeSilent))
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
	if got := eventKinds(ib.Drain()); !slices.Equal(got, []bgtype.EventKind{bgtype.EventCommitFailed}) {
		t.Fatalf("events %v", got)
	}
}

// failTerminalStore refuses to commit terminal records.
type failTerminalStore struct{ store.Store }

func (s *failTerminalStore) Commit(ctx context.Context, owner string, actions ...store.Action) error {
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
	m := newTestManager(t)
	_, err := m.Owner("thread-1").Spawn(t.Context(), func(context.Context, *Task) (any, error) { return nil, nil }, WithWake("loud"))
	if !errors.Is(err, ErrInvalidArgument) || err.Error() != `bgtask: invalid argument: unknown wake policy "loud"` {
		t.Fatalf("spawn with an unknown policy: %v", err)
	}
	if n := len(listTasks(t, m.Owner("thread-1"))); n != 0 {
		t.Fatalf("%d records", n)
	}
	for p, want := range map[bgtype.WakePolicy]bool{"": true, bgtype.WakeSilent: true, bgtype.WakeOnTerminal: true, bgtype.WakeOnActivity: true, "loud": false, "Silent": false} {
		if p.Valid() != want {
			t.Errorf("%q.Valid() = %v", p, !want)
		}
	}
}

// TestProgressDoesNotWake: under the default policy a chatty task's
// progress reaches the inbox as one quiet event per type, kept up to date,
// without waking a waiting owner (Inbox.Wait, Plugin.WaitEvent, OnWake); a
// message does wake it, and the drain has both.
func TestProgressDoesNotWake(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newTestManager(t)
		o := m.Owner("thread-1")
		ib, err := o.Inbox()
		if err != nil {
			t.Fatal(err)
		}
		step, speak := make(chan struct{}), make(chan struct{})
		id, err := o.Spawn(t.Context(), func(ctx context.Context, tk *Task) (any, error) {
			for i := 1; i <= 3; i++ {
				if err := tk.Emit("progress", i); err != nil {
					return nil, err
				}
				if err := tk.Emit("log", "line"); err != nil {
					return nil, err
				}
			}
			close(step)
			<-speak
			return nil, tk.Emit(bgtype.EventTypeMessage, bgtype.Message{From: tk.ID(), Content: "look"})
		})
		if err != nil {
			t.Fatal(err)
		}
		woke := make(chan error, 1)
		go func() { woke <- ib.Wait(context.Background()) }()
		<-step
		synctest.Wait()
		select {
		case err := <-woke:
			t.Fatalf("Inbox.Wait returned %v for progress alone", err)
		default:
		}
		if n := ib.Len(); n != 2 {
			t.Fatalf("inbox holds %d events, want 2 (one per type)", n)
		}
		if p, ok := o.LatestEvent(id); !ok || p.EventType != "log" || string(p.Payload) != `"line"` || p.Count != 6 {
			t.Fatalf("Progress = %+v, %v", p, ok)
		}
		close(speak)
		if err := <-woke; err != nil {
			t.Fatal(err)
		}
		waitTask(t, o, id)
		var got []string
		for _, ev := range ib.Drain() {
			got = append(got, fmt.Sprintf("%s:%s:%s:%v", ev.Kind, ev.EventType, ev.Payload, ev.Quiet))
		}
		want := []string{"custom:progress:3:true", `custom:log:"line":true`, `custom:agent_message:{"from":"` + id + `","content":"look"}:false`, "completed:::false"}
		if !slices.Equal(got, want) {
			t.Fatalf("drained %q\nwant %q", got, want)
		}
		if _, ok := o.LatestEvent(id); ok {
			t.Fatal("Progress of an ended task")
		}
	})
}

// TestProgressDoesNotWakePlugin: a Plugin's WaitEvent and OnWake ignore
// quiet progress; the next delivery still has it.
func TestProgressDoesNotWakePlugin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newTestManager(t)
		var wakes []bgtype.EventKind
		p, err := m.NewReceiver("thread-1", ReceiverConfig{OnWake: func(ev bgtype.Event) { wakes = append(wakes, ev.Kind) }})
		if err != nil {
			t.Fatal(err)
		}
		ctx := t.Context()
		if err := p.RunStart(ctx, RunInfo{RunID: "run-1"}); err != nil {
			t.Fatal(err)
		}
		emit, finish := make(chan struct{}), make(chan struct{})
		progressed := make(chan error, 1)
		id, err := p.Owner().Spawn(ctx, func(ctx context.Context, tk *Task) (any, error) {
			<-emit
			progressed <- tk.Emit("progress", 1)
			<-finish
			return "ok", nil
		})
		if err != nil {
			t.Fatal(err)
		}
		waited := make(chan error, 1)
		go func() { waited <- p.WaitEvent(ctx) }()
		close(emit)
		if err := <-progressed; err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		select {
		case err := <-waited:
			t.Fatalf("WaitEvent returned %v for progress alone", err)
		default:
		}
		close(finish)
		if err := <-waited; err != nil {
			t.Fatal(err)
		}
		waitTask(t, p.Owner(), id)
		msgs, err := p.Deliver(ctx)
		if err != nil || len(msgs) != 2 || msgs[0].Kind != bgtype.EventCustom || !msgs[0].Quiet || msgs[1].Kind != bgtype.EventCompleted {
			t.Fatalf("Deliver = %+v, %v", msgs, err)
		}
		// Between runs, progress is kept for the next run without waking.
		later := make(chan struct{})
		id, err = p.Owner().Spawn(ctx, func(ctx context.Context, tk *Task) (any, error) {
			<-later
			return nil, tk.Emit("progress", 2)
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.RunEnd(ctx, RunOutcome{RunID: "run-1"}); err != nil {
			t.Fatal(err)
		}
		close(later)
		waitTask(t, p.Owner(), id)
		m.calls.wait() // OnWake is called on the callback goroutine
		if !slices.Equal(wakes, []bgtype.EventKind{bgtype.EventCompleted}) {
			t.Fatalf("OnWake heard %v, want only the completion", wakes)
		}
		if err := p.RunStart(ctx, RunInfo{RunID: "run-2"}); err != nil {
			t.Fatal(err)
		}
		msgs, err = p.Deliver(ctx)
		if err != nil || len(msgs) != 2 || !msgs[0].Quiet || string(msgs[0].Payload) != "2" || msgs[1].Kind != bgtype.EventCompleted {
			t.Fatalf("next run's Deliver = %+v, %v", msgs, err)
		}
		if err := p.RunEnd(ctx, RunOutcome{RunID: "run-2"}); err != nil {
			t.Fatal(err)
		}
	})
}

// TestWakeSilentKeepsProgress: a silent task's progress is not in the inbox
// but is kept, and Emit reports success.
func TestWakeSilentKeepsProgress(t *testing.T) {
	m := newTestManager(t)
	o := m.Owner("thread-1")
	emitted, release := make(chan error, 1), make(chan struct{})
	id, err := o.Spawn(t.Context(), func(ctx context.Context, tk *Task) (any, error) {
		emitted <- tk.Emit("progress", map[string]int{"percent": 40})
		<-release
		return nil, nil
	}, WithWake(bgtype.WakeSilent))
	if err != nil {
		t.Fatal(err)
	}
	if err := <-emitted; err != nil {
		t.Fatal(err)
	}
	if p, ok := o.LatestEvent(id); !ok || p.EventType != "progress" || string(p.Payload) != `{"percent":40}` || p.Count != 1 {
		t.Fatalf("Progress = %+v, %v", p, ok)
	}
	if _, ok := m.Owner("thread-2").LatestEvent(id); ok {
		t.Fatal("another owner sees the progress")
	}
	close(release)
	waitTask(t, o, id)
	if evs := drainOwner(t, o); len(evs) != 0 {
		t.Fatalf("silent task delivered %v", eventKinds(evs))
	}
}

// TestProgressCoalescedBetweenRuns: progress that arrives while no run of
// the owner is open is coalesced like in an inbox: the next run gets one
// event per task and type, with the latest payload, in the place of the
// first, and the kept events stay bounded however chatty the task.
func TestProgressCoalescedBetweenRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newTestManager(t)
		p, err := m.NewReceiver("thread-1", ReceiverConfig{})
		if err != nil {
			t.Fatal(err)
		}
		ctx := t.Context()
		if err := p.RunStart(ctx, RunInfo{RunID: "run-1"}); err != nil {
			t.Fatal(err)
		}
		if err := p.RunEnd(ctx, RunOutcome{RunID: "run-1"}); err != nil {
			t.Fatal(err)
		}
		id, err := p.Owner().Spawn(ctx, func(ctx context.Context, tk *Task) (any, error) {
			for i := 1; i <= 5; i++ {
				if err := tk.Emit("progress", i); err != nil {
					return nil, err
				}
				if err := tk.Emit("phase", i*10); err != nil {
					return nil, err
				}
			}
			return "ok", nil
		})
		if err != nil {
			t.Fatal(err)
		}
		waitTask(t, p.Owner(), id)
		if err := p.RunStart(ctx, RunInfo{RunID: "run-2"}); err != nil {
			t.Fatal(err)
		}
		msgs, err := p.Deliver(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, pm := range msgs {
			got = append(got, fmt.Sprintf("%s:%s:%s%s", pm.Kind, pm.EventType, pm.Payload, pm.Result))
		}
		want := []string{"custom:progress:5", "custom:phase:50", `completed::"ok"`}
		if !slices.Equal(got, want) {
			t.Fatalf("run-2 delivered %q, want %q", got, want)
		}
	})
}
