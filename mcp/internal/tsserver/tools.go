package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	bgmcp "github.com/bgtask/bgtask/mcp"
)

// maxSteps bounds the hold tool's progress steps.
const maxSteps = 100

// tools are the suite's host tools:
//
//	echo    {text}            plain (task support forbidden): {"text": text};
//	                          an empty text is the tool error "text must not be empty".
//	hold    {label, steps?}   long (task support optional): reports progress
//	                          i of steps ("step i of N"), then waits until release
//	                          {label} ({"label", "steps"}) or until its ctx ends (the
//	                          ctx's error); steps outside 0..100 is the tool error
//	                          "steps must be between 0 and 100, got N".
//	release {label}           plain: lets that hold return, even one not started yet.
//	probe   {label, until}    plain: waits until that hold has "started" (reported its
//	                          progress and waits) or "stopped" (returned), then
//	                          {"label", "started", "stopped", "ctx_err", "cause"}:
//	                          ctx_err and cause say how a hold that was not released
//	                          saw its ctx end, so a client sees that a cancel reached it.
type tools struct {
	holds holds
}

func newTools() *tools { return &tools{} }

func (ts *tools) list() []bgmcp.Tool {
	return []bgmcp.Tool{
		{
			Name:        "echo",
			Description: "Returns its text.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"],"additionalProperties":false}`),
			TaskSupport: "forbidden",
			Run:         ts.echo,
		},
		{
			Name:        "hold",
			Description: "Reports steps of progress, then waits until released or cancelled.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"label":{"type":"string"},"steps":{"type":"integer"}},"required":["label"],"additionalProperties":false}`),
			TaskSupport: "optional",
			Run:         ts.hold,
		},
		{
			Name:        "release",
			Description: "Lets the hold with this label return.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"label":{"type":"string"}},"required":["label"],"additionalProperties":false}`),
			TaskSupport: "forbidden",
			Run:         ts.release,
		},
		{
			Name:        "probe",
			Description: "Waits until the hold with this label started or stopped, and says how it stopped.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"label":{"type":"string"},"until":{"enum":["started","stopped"]}},"required":["label","until"],"additionalProperties":false}`),
			TaskSupport: "forbidden",
			Run:         ts.probe,
		},
	}
}

// decode reads a call's arguments strictly into v.
func decode(args json.RawMessage, v any) error {
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("invalid arguments: %w", err)
	}
	return nil
}

func (ts *tools) echo(_ context.Context, call *bgmcp.Call) (any, error) {
	var args struct {
		Text string `json:"text"`
	}
	if err := decode(call.Arguments, &args); err != nil {
		return nil, err
	}
	if args.Text == "" {
		return nil, errors.New("text must not be empty")
	}
	return map[string]string{"text": args.Text}, nil
}

func (ts *tools) hold(ctx context.Context, call *bgmcp.Call) (any, error) {
	var args struct {
		Label string `json:"label"`
		Steps int    `json:"steps"`
	}
	if err := decode(call.Arguments, &args); err != nil {
		return nil, err
	}
	if args.Label == "" {
		return nil, errors.New("label must not be empty")
	}
	if args.Steps < 0 || args.Steps > maxSteps {
		return nil, fmt.Errorf("steps must be between 0 and %d, got %d", maxSteps, args.Steps)
	}
	h := ts.holds.get(args.Label)
	if !h.take() {
		return nil, fmt.Errorf("label %q is already used", args.Label)
	}
	defer close(h.stopped)
	for i := 1; i <= args.Steps; i++ {
		call.Progress(float64(i), float64(args.Steps), fmt.Sprintf("step %d of %d", i, args.Steps))
	}
	if !h.wait(ctx) {
		return nil, context.Cause(ctx)
	}
	return map[string]any{"label": args.Label, "steps": args.Steps}, nil
}

func (ts *tools) release(_ context.Context, call *bgmcp.Call) (any, error) {
	var args struct {
		Label string `json:"label"`
	}
	if err := decode(call.Arguments, &args); err != nil {
		return nil, err
	}
	ts.holds.get(args.Label).open()
	return map[string]string{"released": args.Label}, nil
}

func (ts *tools) probe(ctx context.Context, call *bgmcp.Call) (any, error) {
	var args struct {
		Label string `json:"label"`
		Until string `json:"until"`
	}
	if err := decode(call.Arguments, &args); err != nil {
		return nil, err
	}
	h := ts.holds.get(args.Label)
	var done <-chan struct{}
	switch args.Until {
	case "started":
		done = h.started
	case "stopped":
		done = h.stopped
	default:
		return nil, fmt.Errorf(`until must be "started" or "stopped", got %q`, args.Until)
	}
	select {
	case <-done:
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	res := map[string]any{"label": args.Label, "started": true, "stopped": false, "ctx_err": "", "cause": ""}
	select {
	case <-h.stopped:
		res["stopped"], res["ctx_err"], res["cause"] = true, h.ctxErr, h.cause
	default:
	}
	return res, nil
}
