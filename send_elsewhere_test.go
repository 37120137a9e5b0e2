package bgtask

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/internal/memstore"
	"github.com/bgtask/bgtask/internal/storefake"
)

// Two Managers on one store, B's messages carried straight to A: B's sends
// to A's tasks get what A's own sends get, text and kind.
func TestSendElsewhereSameErrors(t *testing.T) {
	shared := &fakeShared{Store: memstore.New()}
	a := newTestManager(t, WithStore(shared), WithInstance("inst-a"))
	carrier := &storefake.Carrier{Shared: shared, To: a.Runtime()}
	b := newTestManager(t, WithStore(carrier), WithInstance("inst-b"))
	oa, ob := a.Owner("thread-1"), b.Owner("thread-1")

	got := make(chan string, 1)
	agent, err := oa.SpawnAgent(t.Context(), func(ctx context.Context, task *Task) (any, error) {
		if err := task.Inbox().Wait(ctx); err != nil {
			return nil, err
		}
		evs := task.Inbox().Drain()
		got <- string(evs[0].Payload)
		return nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	id, err := ob.Send(t.Context(), agent, bgtype.Message{From: "p", Content: "hello"})
	if err != nil || id == "" {
		t.Fatalf("B's Send = %q, %v", id, err)
	}
	if p := <-got; p != `{"content":"hello","from":"p"}` && p != `{"from":"p","content":"hello"}` {
		t.Fatalf("payload %s", p)
	}
	if hist := oa.m.msgs.list(agent); len(hist) != 1 || hist[0].ID != id {
		t.Fatalf("A's history %+v, want the message %s", hist, id)
	}

	release := make(chan struct{})
	plain, err := oa.Spawn(t.Context(), func(ctx context.Context, _ *Task) (any, error) {
		<-release
		return nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		msg  bgtype.Message
		kind error
		text string
	}{
		{bgtype.Message{Content: "x"}, ErrNotSubAgent, "bgtask: task has no inbox (not a sub-agent): " + plain},
		{bgtype.Message{Content: "x", InReplyTo: "in_1"}, ErrNoInputRequest, fmt.Sprintf("bgtask: task has no such open input request: task %s, request %q", plain, "in_1")},
	} {
		_, local := oa.Send(t.Context(), plain, tc.msg)
		_, remote := ob.Send(t.Context(), plain, tc.msg)
		if !errors.Is(remote, tc.kind) || remote.Error() != tc.text || local.Error() != remote.Error() {
			t.Errorf("B's Send(%+v) = %v; A's = %v; want %q", tc.msg, remote, local, tc.text)
		}
	}
	if _, err := b.Owner("thread-2").Send(t.Context(), plain, bgtype.Message{}); !errors.Is(err, ErrNotFound) || err.Error() != "bgtask: task not found: "+plain {
		t.Errorf("another owner's Send = %v", err)
	}
	close(release)
	waitTask(t, oa, plain)
	var se *StatusError
	if _, err := ob.Send(t.Context(), plain, bgtype.Message{}); !errors.As(err, &se) || se.Status != bgtype.StatusCompleted {
		t.Errorf("B's Send to an ended task = %v", err)
	}

	// The instance is gone.
	live, err := oa.Spawn(t.Context(), causeTask(make(chan error, 1)))
	if err != nil {
		t.Fatal(err)
	}
	carrier.Gone = "inst-a"
	_, err = ob.Send(t.Context(), live, bgtype.Message{})
	if !errors.Is(err, ErrTerminal) || err.Error() != fmt.Sprintf(`bgtask: task %s: its instance "inst-a" is gone (the task is interrupted); the message was not delivered`, live) {
		t.Errorf("B's Send with A gone = %v", err)
	}
}
