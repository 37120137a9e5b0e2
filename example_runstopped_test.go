package bgtask_test

import (
	"context"
	"fmt"
	"log"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/agent"
)

// A server runs one agent turn per request, on the request's context, and
// keeps one Plugin per thread while it holds the thread. A client that hangs
// up ends the turn but not the work it started: the task's end reaches the
// thread's next turn, even after the server closed the thread's Plugin and
// made a new one. Only a stop (the cause ErrRunStopped) cancels the turn's
// tasks.
func ExampleRunStopped() {
	ctx := context.Background()
	m, err := bgtask.New()
	if err != nil {
		log.Fatal(err)
	}
	defer m.Shutdown(ctx)
	plugin, err := agent.NewPlugin(m, "thread-1", agent.Config{})
	if err != nil {
		log.Fatal(err)
	}

	// Turn 1: the request's context; the turn starts a task, then the
	// client hangs up.
	req, cancel := context.WithCancelCause(ctx)
	if err := plugin.RunStart(req, bgtask.RunInfo{RunID: "turn-1"}); err != nil {
		log.Fatal(err)
	}
	release := make(chan struct{})
	id, err := plugin.Owner().Spawn(bgtask.WithToolCall(req, bgtask.ToolCall{RunID: "turn-1", CallID: "call-1"}),
		func(ctx context.Context, t *bgtask.Task) (any, error) {
			<-release
			return "report ready", nil
		})
	if err != nil {
		log.Fatal(err)
	}
	cancel(context.Canceled) // the client went away; a stop button would cancel(bgtask.ErrRunStopped)
	fmt.Println("stopped by the user:", bgtask.RunStopped(req))
	if err := plugin.RunEnd(req, bgtask.RunOutcome{RunID: "turn-1", Canceled: bgtask.RunStopped(req)}); err != nil {
		log.Fatal(err)
	}

	// The server forgets the thread; the task ends meanwhile.
	if err := plugin.Close(ctx); err != nil {
		log.Fatal(err)
	}
	close(release)
	if _, err := m.Wait(ctx, id); err != nil {
		log.Fatal(err)
	}

	// Turn 2, on a new request, with the thread's new Plugin.
	plugin, err = agent.NewPlugin(m, "thread-1", agent.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer plugin.Close(ctx)
	if err := plugin.RunStart(ctx, bgtask.RunInfo{RunID: "turn-2"}); err != nil {
		log.Fatal(err)
	}
	msgs, _ := plugin.Deliver(ctx)
	for _, msg := range msgs {
		fmt.Println(msg.Event.Kind, string(msg.Event.Result))
	}
	_ = plugin.RunEnd(ctx, bgtask.RunOutcome{RunID: "turn-2"})
	// Output:
	// stopped by the user: false
	// completed "report ready"
}
