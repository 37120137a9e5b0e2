package agent_test

import (
	"context"
	"fmt"
	"log"
	"strings"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/agent"
)

// A loop calls the plugin at its phase boundaries: RunStart, then each step
// BeforeInference (events become prompt messages, plus the prompt view),
// AfterToolCall and StepEnd; at a natural end with work pending a top-level
// run ends "waiting"; RunEnd closes the run. This loop has no model: it
// shows the calls and what the model would be shown.
func ExamplePlugin() {
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
	if err := plugin.RunStart(ctx, bgtask.RunInfo{RunID: "run-1"}); err != nil {
		log.Fatal(err)
	}

	// Step 1: the model calls a tool that starts background work. The tool
	// runs with the call's lineage on its context.
	release := make(chan struct{})
	toolCtx := bgtask.WithToolCall(ctx, bgtask.ToolCall{RunID: "run-1", CallID: "call-1"})
	id, err := plugin.Owner().Spawn(toolCtx, func(ctx context.Context, t *bgtask.Task) (any, error) {
		<-release
		return "42 files indexed", nil
	}, bgtask.WithName("indexer"))
	if err != nil {
		log.Fatal(err)
	}
	_ = plugin.AfterToolCall(ctx, bgtask.ToolCall{RunID: "run-1", CallID: "call-1"})
	pending, _ := plugin.StepEnd(ctx)
	fmt.Println("pending after step 1:", pending)

	// Step 2: before the inference the model is shown the running task: the
	// plugin's instructions in the system role, the task list (text tasks
	// wrote) in a separate user message.
	msgs, _ := plugin.BeforeInference(ctx)
	for _, msg := range msgs {
		fmt.Printf("%s (ephemeral %v), lists the indexer: %v\n", msg.Role, msg.Ephemeral,
			strings.Contains(msg.Content, `name="indexer" status="running"`))
	}

	// The task completes; the next boundary delivers its event once.
	close(release)
	if _, err := m.Wait(ctx, id); err != nil {
		log.Fatal(err)
	}
	msgs, _ = plugin.BeforeInference(ctx)
	for _, msg := range msgs {
		// A host reads msg.Event; one that has only the text asks the plugin,
		// which accepts only the envelopes it rendered.
		ev, ok := plugin.ParseEvent(msg.Content)
		fmt.Println(msg.Role, msg.Internal, msg.Event.Kind, msg.Event.Name, string(msg.Event.Result), ok && ev.TaskID == id)
	}
	pending, _ = plugin.StepEnd(ctx)
	fmt.Println("pending after step 2:", pending)
	_ = plugin.RunEnd(ctx, bgtask.RunOutcome{RunID: "run-1"})
	// Output:
	// pending after step 1: true
	// system (ephemeral true), lists the indexer: false
	// user (ephemeral true), lists the indexer: true
	// user true completed indexer "42 files indexed" true
	// pending after step 2: false
}
