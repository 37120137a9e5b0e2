package pgstore_test

import (
	"context"
	"slices"
	"testing"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store/pgstore/pgtest"
)

// A sub-agent running on A and its parent's loop on B exchange messages
// (issue 29 §2): what the sub-agent sends to its owner, and its input
// request, reach the owner's run on B once, in order, through the store
// (with B's idle Receiver woken); A's own idle Receiver of the owner
// never hands them out; B's answer reaches the task on A.
func TestSubAgentTalksToItsParentOnAnotherInstance(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDSN(t)
	_, ma, _ := instanceStore(t, dsn, "inst_a")
	_, mb, _ := instanceStore(t, dsn, "inst_b")
	ctx := t.Context()
	ra, err := ma.NewReceiver("alice", bgtask.ReceiverConfig{})
	if err != nil {
		t.Fatal(err)
	}
	woken := newWakeLog()
	rb, err := mb.NewReceiver("alice", bgtask.ReceiverConfig{OnWake: woken.add})
	if err != nil {
		t.Fatal(err)
	}
	answered := make(chan string, 1)
	sent := make(chan struct{})
	id, err := ma.Owner("alice").SpawnAgent(ctx, func(ctx context.Context, tk *bgtask.Task) (any, error) {
		for _, s := range []string{"first", "second"} {
			if _, err := tk.SendToOwner(ctx, s); err != nil {
				return nil, err
			}
		}
		close(sent)
		msg, err := tk.RequestInput(ctx, "which one?")
		if err != nil {
			return nil, err
		}
		answered <- msg.Content
		return "done", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	<-sent
	if got, err := mb.Owner("alice").WaitSettled(ctx, id); err != nil || got.Status != bgtype.StatusAwaitingInput {
		t.Fatalf("WaitSettled on B = %s, %v; want awaiting_input", got.Status, err)
	}
	<-woken.got // B's idle Receiver heard of the news
	if err := rb.RunStart(ctx, bgtask.RunInfo{RunID: "run_b"}); err != nil {
		t.Fatal(err)
	}
	evs, err := rb.Deliver(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	var req *bgtype.InputRequest
	for _, ev := range evs {
		if msg, ok := ev.Message(); ok {
			got = append(got, msg.Content)
		}
		if ev.Kind == bgtype.EventInputRequested {
			req = ev.Input
			got = append(got, "input: "+ev.Input.Prompt)
		}
	}
	if want := []string{"first", "second", "input: which one?"}; !slices.Equal(got, want) {
		t.Fatalf("B's run was handed %q, want %q", got, want)
	}
	if _, err := mb.Owner("alice").Send(ctx, id, bgtype.Message{InReplyTo: req.ID, Content: "the second"}); err != nil {
		t.Fatalf("B's answer: %v", err)
	}
	if a := <-answered; a != "the second" {
		t.Fatalf("the task on A was answered %q", a)
	}
	if evs, err := rb.Deliver(ctx); err != nil || slices.ContainsFunc(evs, func(ev bgtype.Event) bool { return ev.Kind != bgtype.EventCompleted }) {
		t.Fatalf("B's next step = %+v, %v; want at most the sub-agent's end", evs, err)
	}
	if err := rb.RunEnd(ctx, bgtask.RunOutcome{RunID: "run_b"}); err != nil {
		t.Fatal(err)
	}
	if err := ra.RunStart(ctx, bgtask.RunInfo{RunID: "run_a"}); err != nil {
		t.Fatal(err)
	}
	evs, err = ra.Deliver(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if ev.Kind != bgtype.EventCompleted || ev.TaskID != id {
			t.Errorf("A's run was handed %+v: B heard it", ev)
		}
	}
}
