package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/agent"
	"github.com/bgtask/bgtask/agentloop"
	"github.com/bgtask/bgtask/bgtype"
)

// demo holds what the host's tools share.
type demo struct {
	m     *bgtask.Manager
	ui    *screen
	cfg   config
	index *bgtask.Kind[indexSpec, indexCursor] // the indexer: a resumable kind
}

// pause waits d, scaled by the speed flag, or until ctx ends.
func (d *demo) pause(ctx context.Context, dur time.Duration) error {
	t := time.NewTimer(time.Duration(float64(dur) / d.cfg.speed))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// hostTools are the tools this host writes itself: they start background
// work and return at once with the task id, as an export or a crawl would.
func (d *demo) hostTools() []agentloop.Tool {
	return []agentloop.Tool{
		{
			Name:        "research",
			Description: "Start a research sub-agent on a topic. Returns its task id; its answer arrives later.",
			Schema:      json.RawMessage(`{"type":"object","additionalProperties":false,"required":["topic","name"],"properties":{"topic":{"type":"string"},"name":{"type":"string"}}}`),
			Call:        d.research,
		},
		{
			Name:        "index_repo",
			Description: "Index the repository in the background, reporting progress.",
			Schema:      json.RawMessage(`{"type":"object","additionalProperties":false,"required":["files"],"properties":{"files":{"type":"integer","minimum":1}}}`),
			Call:        d.indexRepo,
		},
		{
			Name:        "run_tests",
			Description: "Run the test suite. Returns its result when it is quick; when it is slow, it goes on in the background and the result gives its task id.",
			Schema:      json.RawMessage(`{"type":"object","additionalProperties":false,"properties":{}}`),
			Call:        d.runTests,
		},
	}
}

// lintTool is a host tool the model may run in the background
// (agent.Background): the lead asks for it with run_in_background, gets a
// task id at once, and hears of its end like any task's; what it prints
// is its output, which the model reads with get_task (output_since) and the
// demo shows when it ends.
func (d *demo) lintTool(o bgtask.Owner) (agentloop.Tool, error) {
	t, err := agent.Background(o, agent.Tool{
		Name:        "lint",
		Description: "Lint the repository's packages.",
		Schema:      json.RawMessage(`{"type":"object","additionalProperties":false,"required":["packages"],"properties":{"packages":{"type":"integer"}}}`),
		Call:        d.lint,
	}, agent.BackgroundOptions{
		Wait:         time.Duration(float64(foregroundTime) / d.cfg.speed),
		SpawnOptions: []bgtask.SpawnOption{bgtask.WithName("lint")},
	})
	return agentloop.Tool(t), err
}

// lint lints in steps, printing a line per package to its task's output.
func (d *demo) lint(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
	var in struct{ Packages int }
	if err := strictDecode(args, &in); err != nil {
		return nil, err
	}
	out := bgtask.OutputFrom(ctx)
	for i := 1; i <= in.Packages; i++ {
		if err := d.pause(ctx, 150*time.Millisecond); err != nil {
			return nil, err
		}
		fmt.Fprintf(out, "lint: package %d clean\n", i)
	}
	if t, ok := bgtask.TaskFromContext(ctx); ok {
		d.ui.note("  * lint (in the background at the model's choice) wrote %d bytes of output\n", d.m.Owner(t.Owner()).OutputSize(t.ID()))
	}
	return json.Marshal(fmt.Sprintf("lint: %d packages clean", in.Packages))
}

// foregroundTime is how long run_tests waits for the suite before it
// promotes it to a background task.
const foregroundTime = 100 * time.Millisecond

// runTests runs the suite in the foreground for up to foregroundTime
// (scaled by the speed flag) with Owner.Foreground: a quick suite's result
// is the tool result; a slow one is promoted to a background task, the
// tool result gives its task id, and its result reaches the lead later, as
// an event, like any task's. The suite runs once either way.
func (d *demo) runTests(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
	if err := strictDecode(args, &struct{}{}); err != nil {
		return nil, err
	}
	owner, err := d.ownerOf(ctx)
	if err != nil {
		return nil, err
	}
	wait := time.Duration(float64(foregroundTime) / d.cfg.speed)
	res, err := owner.Foreground(ctx, wait, func(ctx context.Context, t *bgtask.Task) (any, error) {
		const packages = 10
		for done := 1; done <= packages; done++ {
			if err := d.pause(ctx, 200*time.Millisecond); err != nil {
				return nil, err
			}
			d.ui.progress(t.ID(), t.Name(), done, packages)
		}
		return fmt.Sprintf("tests: %d packages passed", packages), nil
	}, bgtask.WithName("tests"), bgtask.WithDescription("run the test suite"))
	if err != nil {
		return nil, err
	}
	if res.Promoted {
		d.ui.note("  * tests promoted to the background: run_tests still running after %v\n", foregroundTime)
	}
	return res.Result, nil
}

// research starts a sub-agent: an agent loop of its own with its own inbox.
func (d *demo) research(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
	var in struct{ Topic, Name string }
	if err := strictDecode(args, &in); err != nil {
		return nil, err
	}
	owner, err := d.ownerOf(ctx)
	if err != nil {
		return nil, err
	}
	searching := make(chan struct{})
	id, err := owner.SpawnAgent(ctx, func(ctx context.Context, t *bgtask.Task) (any, error) {
		return d.runResearcher(ctx, t, in.Topic, searching)
	}, bgtask.WithName(in.Name), bgtask.WithDescription("research "+in.Topic))
	if err != nil {
		return nil, err
	}
	// Return once the sub-agent has started its own tasks, so the table
	// shows what a cancel of it reaches.
	select {
	case <-searching:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return json.Marshal(map[string]string{"task_id": id, "status": "started"})
}

// indexRepo starts the indexer, a slow task that reports progress. Its wake
// policy is the default: progress is quiet (each report replaces the one
// the lead has not seen yet) and reaches the model with the next event that
// wakes it, never on its own. The indexer is a resumable kind: if the demo
// is killed while it runs, the next start resumes it from its checkpoint,
// and a call of the tool then returns the resumed task.
func (d *demo) indexRepo(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
	var in indexSpec
	if err := strictDecode(args, &in); err != nil {
		return nil, err
	}
	if in.Files < 1 {
		return nil, fmt.Errorf("files must be at least 1, got %d", in.Files)
	}
	owner, err := d.ownerOf(ctx)
	if err != nil {
		return nil, err
	}
	for meta, err := range owner.List(ctx, bgtype.StatusQueued, bgtype.StatusRunning) {
		if err != nil {
			return nil, err
		}
		if meta.Name == "indexer" && meta.Resume != nil { // resumed after a restart
			return json.Marshal(map[string]string{"task_id": meta.ID, "status": "resumed"})
		}
	}
	id, err := d.index.Spawn(ctx, owner, in, bgtask.WithName("indexer"), bgtask.WithDescription("index the repository"))
	if err != nil {
		return nil, err
	}
	return json.Marshal(map[string]string{"task_id": id, "status": "started"})
}

// indexSpec is what the indexer is spawned with; indexCursor what it
// saves after each batch of files: where the next attempt starts.
type (
	indexSpec   struct{ Files int }
	indexCursor struct {
		Done int `json:"done"`
	}
)

// indexFiles is the indexer: batches of a tenth of the files, a
// checkpoint after each.
func (d *demo) indexFiles(ctx context.Context, t *bgtask.Task, in indexSpec, cp *bgtask.Checkpoint[indexCursor]) (any, error) {
	cur, resumed := cp.Last()
	step := max(in.Files/10, 1)
	for done := cur.Done; done < in.Files; {
		if err := d.pause(ctx, 200*time.Millisecond); err != nil {
			return nil, err
		}
		done = min(done+step, in.Files)
		d.ui.progress(t.ID(), t.Name(), done, in.Files)
		if err := t.Emit("progress", map[string]int{"done": done, "total": in.Files}); err != nil {
			return nil, err
		}
		if err := cp.Save(ctx, indexCursor{Done: done}); err != nil {
			return nil, err
		}
	}
	if t.Attempt() > 1 {
		from := "the start"
		if resumed {
			from = fmt.Sprintf("file %d", cur.Done)
		}
		return fmt.Sprintf("indexed %d files (resumed on attempt %d from %s)", in.Files, t.Attempt(), from), nil
	}
	return fmt.Sprintf("indexed %d files", in.Files), nil
}

// ownerOf is the agent a tool call works for: the sub-agent whose loop
// runs it, or the lead.
func (d *demo) ownerOf(ctx context.Context) (bgtask.Owner, error) {
	if t, ok := bgtask.TaskFromContext(ctx); ok {
		return t.Agent()
	}
	return d.m.Owner("thread-lead"), nil
}

// taskTools are bgtask's model-facing tools, scoped to the owner, in the
// loop's tool shape. cancel_task returns once the tasks it cancelled have
// stopped (see settled), so the model's next step sees them stopped.
func (d *demo) taskTools(o bgtask.Owner) []agentloop.Tool {
	var out []agentloop.Tool
	for _, t := range agent.Tools(o, agent.WithOnSelfCancel(agentloop.CancelRun)) {
		if t.Name == "cancel_task" {
			cancel := t.Call
			t.Call = func(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
				res, err := cancel(ctx, args)
				if err != nil {
					return res, err
				}
				var r struct {
					Status string `json:"status"`
					Root   string `json:"root_task_id"`
				}
				if json.Unmarshal(res, &r) == nil && r.Status == "accepted" {
					if err := d.settled(ctx, o, r.Root); err != nil {
						return nil, err
					}
				}
				return res, nil
			}
		}
		out = append(out, agentloop.Tool(t))
	}
	return out
}

// settled waits until the task id of o and every task under it have ended
// and their terminal events were delivered. A cancel only signals the
// tasks; they stop on their own goroutines, and the lead would otherwise
// hear of them at a moment that depends on the machine's load.
func (d *demo) settled(ctx context.Context, o bgtask.Owner, id string) error {
	if _, err := o.Wait(ctx, id); err != nil {
		if _, failed := errors.AsType[*bgtask.TaskError](err); !failed { // a failed task has ended too
			return err
		}
	}
	for kid, err := range d.m.Store().Children(ctx, id) {
		if err != nil {
			return err
		}
		if err := d.settled(ctx, d.m.Owner(kid.Owner), kid.ID); err != nil {
			return err
		}
	}
	return nil
}

// strictDecode decodes a tool's arguments, refusing unknown fields.
func strictDecode(args json.RawMessage, v any) error {
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("invalid arguments: %v", err)
	}
	return nil
}
