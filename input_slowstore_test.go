package bgtask

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/bgtask/bgtask/internal/memstore"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"
)

// slowStore is a MemoryStore whose commits of awaiting_input records block
// until release is closed; entered is closed when the first one arrives.
type slowStore struct {
	*memstore.Store
	entered chan struct{}
	release chan struct{}
}

func newSlowStore() *slowStore {
	return &slowStore{Store: memstore.New(), entered: make(chan struct{}), release: make(chan struct{})}
}

func (s *slowStore) Commit(ctx context.Context, owner string, actions ...store.Action) error {
	for _, a := range actions {
		for _, meta := range a.Tasks {
			if meta.Status == bgtype.StatusAwaitingInput {
				close(s.entered)
				<-s.release
			}
		}
	}
	return s.Store.Commit(ctx, owner, actions...)
}

// eventSummary is what the slow-store tests compare of an event.
type eventSummary struct {
	kind      bgtype.EventKind
	taskID    string
	eventType string
}

func summarize(evs []bgtype.Event) []eventSummary {
	out := make([]eventSummary, 0, len(evs))
	for _, ev := range evs {
		out = append(out, eventSummary{ev.Kind, ev.TaskID, ev.EventType})
	}
	return out
}

// TestRequestInputSlowStoreDoesNotBlockEmit: while a task's input request
// is stuck in the Store's commit, Emit of the same task and of another task
// return at once, and their events are in the inbox before the request's.
func TestRequestInputSlowStoreDoesNotBlockEmit(t *testing.T) {
	store := newSlowStore()
	m := newTestManager(t, WithStore(store))
	o := m.Owner("thread-1")
	handles := make(chan *Task, 2)
	asker, err := o.Spawn(t.Context(), func(ctx context.Context, tk *Task) (any, error) {
		handles <- tk
		msg, err := tk.RequestInput(ctx, "Which region?")
		return msg.Content, err
	}, WithWake(bgtype.WakeOnActivity))
	if err != nil {
		t.Fatal(err)
	}
	tkA := <-handles
	other, err := o.Spawn(t.Context(), func(ctx context.Context, tk *Task) (any, error) {
		handles <- tk
		<-ctx.Done()
		return nil, ctx.Err()
	}, WithWake(bgtype.WakeOnActivity))
	if err != nil {
		t.Fatal(err)
	}
	tkB := <-handles

	<-store.entered // the request's commit is in the Store now, and stays there
	if err := tkA.Emit("progress", 1); err != nil {
		t.Fatalf("Emit of the asking task: %v", err)
	}
	if err := tkB.Emit("progress", 2); err != nil {
		t.Fatalf("Emit of another task: %v", err)
	}
	want := []eventSummary{{bgtype.EventCustom, asker, "progress"}, {bgtype.EventCustom, other, "progress"}}
	if got := summarize(drainOwner(t, o)); !slices.Equal(got, want) {
		t.Fatalf("events while the commit is stuck: %+v, want %+v", got, want)
	}

	close(store.release)
	meta, err := m.waitSettled(t.Context(), ownerReach("thread-1"), asker)
	if err != nil || meta.Status != bgtype.StatusAwaitingInput || meta.Input == nil {
		t.Fatalf("after the commit: %s %+v, %v", meta.Status, meta.Input, err)
	}
	evs := drainOwner(t, o)
	if got, want := summarize(evs), []eventSummary{{bgtype.EventInputRequested, asker, ""}}; !slices.Equal(got, want) {
		t.Fatalf("events after the commit: %+v, want %+v", got, want)
	}
	if _, err := o.Send(t.Context(), asker, bgtype.Message{From: "user", Content: "eu-west", InReplyTo: evs[0].Input.ID}); err != nil {
		t.Fatal(err)
	}
	if got := waitTask(t, o, asker); got.Status != bgtype.StatusCompleted || string(got.Result) != `"eu-west"` {
		t.Fatalf("end %s %s", got.Status, got.Result)
	}
	if _, err := o.Cancel(t.Context(), other); err != nil {
		t.Fatal(err)
	}
	if got := waitTask(t, o, other); got.Status != bgtype.StatusCanceled {
		t.Fatalf("other ended %s", got.Status)
	}
}

// TestRequestInputCrossesTheEnd: a request whose commit is still in the
// Store when the task's function returns comes first: the terminal record
// waits for it and wins, no input_requested event follows the terminal
// one, and the request returns ErrTerminal.
func TestRequestInputCrossesTheEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newSlowStore()
		m := newTestManager(t, WithStore(store))
		o := m.Owner("thread-1")
		asked := make(chan error, 1)
		id, err := o.Spawn(t.Context(), func(ctx context.Context, tk *Task) (any, error) {
			go func() {
				_, err := tk.RequestInput(ctx, "Which region?")
				asked <- err
			}()
			<-store.entered
			return "done", nil
		}, WithWake(bgtype.WakeOnActivity))
		if err != nil {
			t.Fatal(err)
		}
		<-store.entered
		synctest.Wait() // the function has returned; its end waits for the request's commit
		close(store.release)
		if got := waitTask(t, o, id); got.Status != bgtype.StatusCompleted || string(got.Result) != `"done"` || got.Input != nil {
			t.Fatalf("end %s %s %+v", got.Status, got.Result, got.Input)
		}
		if err := <-asked; !errors.Is(err, errTaskEnded) {
			t.Fatalf("RequestInput: %v, want ErrTerminal", err)
		}
		if got, want := summarize(drainOwner(t, o)), []eventSummary{{bgtype.EventCompleted, id, ""}}; !slices.Equal(got, want) {
			t.Fatalf("events %+v, want %+v", got, want)
		}
	})
}

// visibleFirstStore is a MemoryStore whose commit of an awaiting_input
// record is visible (committed) before Commit returns, which waits for
// release: as when another instance hears of the request from the
// database before the committing instance went on.
type visibleFirstStore struct {
	*memstore.Store
	committed chan struct{}
	release   chan struct{}
}

func (s *visibleFirstStore) Commit(ctx context.Context, owner string, actions ...store.Action) error {
	if err := s.Store.Commit(ctx, owner, actions...); err != nil {
		return err
	}
	for _, a := range actions {
		for _, meta := range a.Tasks {
			if meta.Status == bgtype.StatusAwaitingInput {
				close(s.committed)
				<-s.release
			}
		}
	}
	return nil
}

// An answer that arrives once the request's record is committed, before
// the commit returned to the task, waits for it and is taken: never
// ErrNoInputRequest for a request the store already shows.
func TestAnswerWhileRequestCommits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &visibleFirstStore{Store: memstore.New(), committed: make(chan struct{}), release: make(chan struct{})}
		m := newTestManager(t, WithStore(st))
		var releaseOnce sync.Once
		release := func() { releaseOnce.Do(func() { close(st.release) }) }
		t.Cleanup(release) // before the Manager's shutdown, which waits for the task
		o := m.Owner("alice")
		got := make(chan bgtype.Message, 1)
		id, err := o.Spawn(t.Context(), func(ctx context.Context, task *Task) (any, error) {
			msg, err := task.RequestInput(ctx, "which one?")
			got <- msg
			return nil, err
		})
		if err != nil {
			t.Fatal(err)
		}
		<-st.committed
		meta, err := st.Get(t.Context(), id)
		if err != nil || meta.Input == nil {
			t.Fatalf("record %+v, %v; want the request", meta, err)
		}
		sent := make(chan error, 1)
		go func() {
			_, err := o.Send(t.Context(), id, bgtype.Message{Content: "this", InReplyTo: meta.Input.ID})
			sent <- err
		}()
		synctest.Wait()
		select {
		case err := <-sent:
			t.Fatalf("the answer returned %v before the request was open", err)
		default:
		}
		release()
		if err := <-sent; err != nil {
			t.Fatalf("answer: %v", err)
		}
		if msg := <-got; msg.Content != "this" {
			t.Fatalf("RequestInput returned %+v", msg)
		}
		waitTask(t, o, id)
	})
}
