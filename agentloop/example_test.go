package agentloop_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/agentloop"
)

// A top-level run whose model starts background work and answers at once
// ends "waiting" for it; the next run gets the completion at its first step.
func ExampleRun() {
	ctx := context.Background()
	m, err := bgtask.New()
	if err != nil {
		log.Fatal(err)
	}
	defer m.Shutdown(ctx)
	plugin, err := bgtask.NewPlugin(m, "thread-1")
	if err != nil {
		log.Fatal(err)
	}
	release := make(chan struct{})
	var exportID string
	start := agentloop.Tool{
		Name:   "start_export",
		Schema: json.RawMessage(`{"type":"object","additionalProperties":false}`),
		Call: func(ctx context.Context, _ json.RawMessage) (json.RawMessage, error) {
			var err error
			exportID, err = plugin.Owner().Spawn(ctx, func(ctx context.Context, _ *bgtask.Task) (any, error) {
				<-release
				return "export.csv", nil
			})
			return json.RawMessage(`{"status":"started"}`), err
		},
	}
	model := agentloop.NewScriptedModel(
		agentloop.Call(agentloop.CallSpec{Name: "start_export", Args: map[string]any{}}),
		agentloop.Say("The export is running."),
		func(req agentloop.Request) agentloop.Response {
			for _, msg := range req.Messages {
				if ev, ok := plugin.ParseEvent(msg.Content); ok && ev.Kind == bgtask.EventCompleted {
					return agentloop.Response{Text: "Done: " + string(ev.Result)}
				}
			}
			return agentloop.Response{Text: "nothing yet"}
		},
	)
	cfg := agentloop.Config{Model: model, Tools: []agentloop.Tool{start}, Hooks: plugin, RunID: "run-1"}
	res, err := agentloop.Run(ctx, cfg, []agentloop.Message{{Role: "user", Content: "export my data"}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Status, res.Reason, res.Steps, res.Response)

	close(release) // the export finishes between the runs
	if _, err := m.Wait(ctx, exportID); err != nil {
		log.Fatal(err)
	}
	cfg.RunID = "run-2"
	res, err = agentloop.Run(ctx, cfg, []agentloop.Message{{Role: "user", Content: "is it done?"}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Status, res.Reason, res.Steps, res.Response)
	// Output:
	// waiting awaiting_tasks 2 The export is running.
	// done natural 1 Done: "export.csv"
}
