package bga2a

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/bgtask/bgtask/bgtype"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/bgtask/bgtask"
)

// waitAgent waits until it is cancelled.
func waitAgent(ctx context.Context, t *bgtask.Task) (any, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func TestStreamEndsCanceledAtShutdown(t *testing.T) {
	t.Parallel()
	b := setup(t, waitAgent)
	var got []a2a.Event
	for ev, err := range b.client(t, "alice").SendStreamingMessage(t.Context(), userText("", "wait")) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ev)
		if len(got) == 1 {
			if err := b.m.Shutdown(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
	}
	if want := []string{"task:working", "status:canceled:final"}; !slices.Equal(statesOf(got), want) {
		t.Errorf("events = %v, want %v", statesOf(got), want)
	}
}

func TestCloseEndsStreamsAndRequests(t *testing.T) {
	t.Parallel()
	b := setup(t, waitAgent)
	c := b.client(t, "alice")
	var got []a2a.Event
	var streamErr error
	for ev, err := range c.SendStreamingMessage(t.Context(), userText("", "wait")) {
		if err != nil {
			streamErr = err
			break
		}
		got = append(got, ev)
		b.srv.Close()
	}
	if want := []string{"task:working"}; !slices.Equal(statesOf(got), want) {
		t.Errorf("events = %v, want %v", statesOf(got), want)
	}
	if !errors.Is(streamErr, a2a.ErrServerError) || streamErr.Error() != ("events of task "+string(got[0].(*a2a.Task).ID)+": server error: bga2a: server closed: server error") {
		t.Errorf("stream error after Close = %v, want a server error saying the server closed", streamErr)
	}
	_, err := c.SendMessage(t.Context(), userText("", "wait"))
	if !errors.Is(err, a2a.ErrServerError) {
		t.Errorf("send after Close = %v, want a server error", err)
	}
	// Reads still work: the task is the Manager's.
	task, err := c.GetTask(t.Context(), &a2a.TaskQueryParams{ID: got[0].(*a2a.Task).ID})
	if err != nil || task.Status.State != a2a.TaskStateWorking {
		t.Errorf("get after Close = %v, %v; want the working task", task, err)
	}
}

func TestResubscribeFollowsLiveTask(t *testing.T) {
	t.Parallel()
	b := setup(t, chatAgent)
	id, _ := streamUntilMessage(t, b, "alice", userText("", "hello"))
	c := b.client(t, "alice")
	var got []string
	for ev, err := range c.ResubscribeToTask(t.Context(), &a2a.TaskIDParams{ID: id}) {
		if err != nil {
			t.Fatal(err)
		}
		switch ev := ev.(type) {
		case *a2a.Task:
			got = append(got, "task:"+string(ev.Status.State))
			params := userText(id, "bye")
			params.Config = &a2a.MessageSendConfig{Blocking: new(false)}
			if _, err := c.SendMessage(t.Context(), params); err != nil {
				t.Fatal(err)
			}
		case *a2a.TaskStatusUpdateEvent:
			got = append(got, "status:"+string(ev.Status.State))
		case *a2a.TaskArtifactUpdateEvent:
			got = append(got, "artifact")
		}
	}
	if want := []string{"task:working", "artifact", "status:completed"}; !slices.Equal(got, want) {
		t.Errorf("resubscribed events = %v, want %v", got, want)
	}
	// Another owner cannot follow it.
	for _, err := range b.client(t, "bob").ResubscribeToTask(t.Context(), &a2a.TaskIDParams{ID: id}) {
		if !errors.Is(err, a2a.ErrTaskNotFound) {
			t.Errorf("bob resubscribing: %v, want task not found", err)
		}
		break
	}
}

func TestSlowFollowerIsDropped(t *testing.T) {
	t.Parallel()
	m, err := bgtask.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Shutdown(context.Background()) })
	h := newHub(m)
	p, err := h.lock("alice")
	if err != nil {
		t.Fatal(err)
	}
	slow, fast := p.follow("task_a"), p.follow("task_a")
	for range maxQueued {
		p.dispatch(bgtype.Event{Kind: bgtype.EventCustom, TaskID: "task_a", EventType: "progress"})
	}
	fast.q.Drain()
	p.dispatch(bgtype.Event{Kind: bgtype.EventCustom, TaskID: "task_a", EventType: "progress"})
	if !slow.q.Closed() || fast.q.Closed() || p.nsubs != 1 || fast.q.Len() != 1 {
		t.Errorf("slow closed %v, fast closed %v, followers %d, fast queue %d; want only the slow one dropped",
			slow.q.Closed(), fast.q.Closed(), p.nsubs, fast.q.Len())
	}
	p.mu.Unlock()
	if _, err := slow.next(t.Context()); err != errBehind {
		t.Errorf("dropped follower's next: %v, want %v", err, errBehind)
	}
	h.close()
}
