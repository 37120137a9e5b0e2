package bgtask_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"

	"github.com/bgtask/bgtask"
)

// A host that writes its own loop and renders events itself takes them
// from the owner's Receiver: RunStart, then Deliver at each boundary
// (each event once, terminal ones marked announced), Pending at a natural
// end, RunEnd. The events are the tasks' own text: escape and cut them
// before a model reads them (package agent's Plugin does).
func ExampleManager_NewReceiver() {
	ctx := context.Background()
	m, err := bgtask.New()
	if err != nil {
		log.Fatal(err)
	}
	defer m.Shutdown(ctx)
	r, err := m.NewReceiver("thread-1", bgtask.ReceiverConfig{})
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close(ctx)
	if err := r.RunStart(ctx, bgtask.RunInfo{RunID: "run-1"}); err != nil {
		log.Fatal(err)
	}
	_, err = r.Owner().Spawn(ctx, func(context.Context, *bgtask.Task) (any, error) {
		return "indexed", nil
	}, bgtask.WithName("indexer"))
	if err != nil {
		log.Fatal(err)
	}
	if err := r.WaitEvent(ctx); err != nil { // until its end can be delivered
		log.Fatal(err)
	}
	evs, err := r.Deliver(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, ev := range evs {
		fmt.Println(ev.Kind, ev.Name, string(ev.Result))
	}
	pending, _ := r.Pending(ctx)
	fmt.Println("pending:", pending)
	if err := r.RunEnd(ctx, bgtask.RunOutcome{RunID: "run-1"}); err != nil {
		log.Fatal(err)
	}
	// Output:
	// completed indexer "indexed"
	// pending: false
}

// A host's own cancel tool: the caller is read from the tool call's
// context, the current task (with its tree) if the call runs inside one
// of the owner's tasks, else the run of its ToolCall.
func ExampleOwner_CancelCurrent() {
	ctx := context.Background()
	m, err := bgtask.New()
	if err != nil {
		log.Fatal(err)
	}
	defer m.Shutdown(ctx)
	owner := m.Owner("thread-1")
	call := bgtask.WithToolCall(ctx, bgtask.ToolCall{RunID: "run-1", CallID: "call-1"})
	started := make(chan struct{})
	if _, err := owner.Spawn(call, func(ctx context.Context, _ *bgtask.Task) (any, error) {
		close(started)
		<-ctx.Done()
		return nil, ctx.Err()
	}); err != nil {
		log.Fatal(err)
	}
	<-started
	stopTool := func(ctx context.Context, _ json.RawMessage) (json.RawMessage, error) {
		n, before, err := owner.CancelCurrent(ctx, bgtask.WithReason("the user changed the plan"))
		if err != nil {
			return nil, err
		}
		return json.Marshal(map[string]any{"cancelled": n, "already": before})
	}
	res, err := stopTool(call, nil)
	fmt.Println(string(res), err)
	res, err = stopTool(call, nil)
	fmt.Println(string(res), err)
	// Output:
	// {"already":false,"cancelled":1} <nil>
	// {"already":true,"cancelled":0} <nil>
}
