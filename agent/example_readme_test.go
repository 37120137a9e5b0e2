package agent_test

import (
	"context"
	"fmt"
	"log"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/agent"
	"github.com/bgtask/bgtask/bgtype"
)

// The README's "Wiring it into an agent loop": one agent turn through the
// Plugin's boundaries, with a model that calls one tool, then answers once
// it saw the task the tool started complete.
func Example_readmeLoop() {
	ctx := context.Background()
	m, err := bgtask.New()
	if err != nil {
		log.Fatal(err)
	}
	defer m.Shutdown(ctx)
	startAnotherRun := func(ev bgtype.Event) {} // a host signals its loop to start a run
	cancelThisRun := func(ctx context.Context) {}
	subAgent := false // a top-level agent's loop
	type call struct{ ID string }
	type reply struct{ Calls []call }
	var history []agent.PromptMessage
	steps := 0
	model := func(ctx context.Context, msgs []agent.PromptMessage, tools []agent.Tool) reply {
		steps++
		for _, msg := range msgs {
			if msg.Event != nil {
				fmt.Printf("step %d: the model sees %s %s\n", steps, msg.Event.Kind, msg.Event.Name)
			}
		}
		if steps == 1 {
			return reply{Calls: []call{{ID: "call-1"}}}
		}
		fmt.Printf("step %d: the model answers (%d tools)\n", steps, len(tools))
		return reply{}
	}
	run := func(ctx context.Context, c call) { // the tool starts a task, which ends before the step does
		id, err := m.Owner("thread-1").Spawn(ctx, func(ctx context.Context, t *bgtask.Task) (any, error) {
			return "42 files", nil
		}, bgtask.WithName("indexer"))
		if err == nil {
			_, err = m.Owner("thread-1").Wait(ctx, id)
		}
		fmt.Println("tool", c.ID, "ran:", err)
	}

	// One live Plugin per owner per Manager: a server keeps it while it holds the thread and
	// closes it when it forgets the thread. A second NewPlugin of a live owner is ErrReceiverExists.
	plugin, _ := agent.NewPlugin(m, "thread-1", agent.Config{Receiver: bgtask.ReceiverConfig{OnWake: startAnotherRun}})
	defer plugin.Close(ctx) // the next Plugin of the thread gets every event this one did not deliver

	// The model's tools: list_tasks, get_task, cancel_task, send_message, wait_task.
	tools := agent.Tools(plugin.Owner(), agent.WithOnSelfCancel(cancelThisRun))

	// One agent turn per request. ctx is the turn's, context.WithoutCancel(r.Context()) (a client
	// that hangs up fails no spawn of the turn's tools), which the host cancels with
	// cancel(bgtask.ErrRunStopped) when the user presses stop.
	plugin.RunStart(ctx, bgtask.RunInfo{RunID: "run-1"}) // fresh inbox; tasks a dead process left running become interrupted
	for ctx.Err() == nil {
		msgs, _ := plugin.BeforeInference(ctx) // events in nonce-tagged envelopes, plus the task view
		resp := model(ctx, append(history, msgs...), tools)
		for _, call := range resp.Calls { // tools run with the call's lineage
			run(bgtask.WithToolCall(ctx, bgtask.ToolCall{RunID: "run-1", CallID: call.ID}), call)
			plugin.AfterToolCall(ctx, bgtask.ToolCall{RunID: "run-1", CallID: call.ID})
		}
		pending, _ := plugin.StepEnd(ctx)
		if len(resp.Calls) > 0 {
			continue
		}
		if more, _ := plugin.Deliver(ctx); len(more) > 0 {
			continue // something arrived: one more turn
		}
		if pending && subAgent {
			plugin.WaitEvent(ctx) // a sub-agent waits; a top-level run ends "waiting" (awaiting_tasks)
			continue
		}
		break
	}
	// Only a stop cancels the run's tasks; after a hang-up they go on and their ends reach the
	// next run. RunEnd commits even though ctx has ended, and ends only the run it names.
	plugin.RunEnd(ctx, bgtask.RunOutcome{RunID: "run-1", Canceled: bgtask.RunStopped(ctx)}) // late events go to OnWake, then the next run
	// Output:
	// tool call-1 ran: <nil>
	// step 2: the model sees completed indexer
	// step 2: the model answers (5 tools)
}
