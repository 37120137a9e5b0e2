package agentloop_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"strings"
	"time"

	"github.com/bgtask/bgtask/agent"
	"github.com/bgtask/bgtask/bgtype"

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
	plugin, err := agent.NewPlugin(m, "thread-1", agent.Config{})
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
				if ev, ok := plugin.ParseEvent(msg.Content); ok && ev.Kind == bgtype.EventCompleted {
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

// A tool that may be slow runs its work with Owner.Foreground: a quick
// call answers the model directly; a slow one is promoted to a background
// task, the model reads its id in the tool result, the run ends waiting
// for it, and the next run gets its completion.
func ExampleRun_foreground() {
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
	release := make(chan struct{})
	build := agentloop.Tool{
		Name:   "build",
		Schema: json.RawMessage(`{"type":"object","additionalProperties":false,"required":["target"],"properties":{"target":{"type":"string"}}}`),
		Call: func(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
			var in struct{ Target string }
			if err := json.Unmarshal(args, &in); err != nil {
				return nil, err
			}
			res, err := plugin.Owner().Foreground(ctx, 50*time.Millisecond, func(ctx context.Context, _ *bgtask.Task) (any, error) {
				if in.Target == "all" {
					<-release // slow: still building when the call is promoted
				}
				return "built " + in.Target, nil
			})
			return res.Result, err
		},
	}
	var promoted string // the task id the model read in the tool result
	model := agentloop.NewScriptedModel(
		agentloop.Call(agentloop.CallSpec{Name: "build", Args: map[string]string{"target": "docs"}},
			agentloop.CallSpec{Name: "build", Args: map[string]string{"target": "all"}}),
		func(req agentloop.Request) agentloop.Response {
			var said []string
			for _, msg := range req.Messages {
				var notice struct {
					Status string `json:"status"`
					TaskID string `json:"task_id"`
				}
				switch {
				case msg.Role != "tool":
				case json.Unmarshal([]byte(msg.Content), &notice) == nil && notice.Status == "promoted":
					promoted = notice.TaskID
					said = append(said, "the full build goes on in the background")
				default:
					said = append(said, "got "+msg.Content)
				}
			}
			return agentloop.Response{Text: strings.Join(said, "; ")}
		},
		func(req agentloop.Request) agentloop.Response {
			for _, msg := range req.Messages {
				if ev, ok := plugin.ParseEvent(msg.Content); ok && ev.TaskID == promoted {
					return agentloop.Response{Text: "Full build " + string(ev.Kind) + ": " + string(ev.Result)}
				}
			}
			return agentloop.Response{Text: "nothing yet"}
		},
	)
	cfg := agentloop.Config{Model: model, Tools: []agentloop.Tool{build}, Hooks: plugin, RunID: "run-1"}
	res, err := agentloop.Run(ctx, cfg, []agentloop.Message{{Role: "user", Content: "build the docs, then everything"}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Status, res.Reason, res.Response)

	close(release) // the full build ends between the runs
	if _, err := m.Wait(ctx, promoted); err != nil {
		log.Fatal(err)
	}
	cfg.RunID = "run-2"
	res, err = agentloop.Run(ctx, cfg, []agentloop.Message{{Role: "user", Content: "done?"}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Status, res.Reason, res.Response)
	// Output:
	// waiting awaiting_tasks got "built docs"; the full build goes on in the background
	// done natural Full build completed: "built all"
}
