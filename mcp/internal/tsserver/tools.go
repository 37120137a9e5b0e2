package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

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
//	big     {kib}             long (task support optional): {"kib", "data"}, data a text
//	                          of kib KiB (1..1024) with characters JSON escapes, so the
//	                          result is over the record's 64 KiB cap from kib 32 on.
//	ask     {question}        long (task support required): asks its client the question
//	                          (Task.RequestInput) and returns {"answer"}.
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
		{
			Name:        "big",
			Description: "Returns kib KiB of text.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"kib":{"type":"integer"}},"required":["kib"],"additionalProperties":false}`),
			TaskSupport: "optional",
			Run:         ts.big,
		},
		{
			Name:        "ask",
			Description: "Asks its client the question and returns the answer.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"question":{"type":"string"}},"required":["question"],"additionalProperties":false}`),
			TaskSupport: "required",
			Run:         ts.ask,
		},
	}
}

// bigLine is the unit of big's text: 16 bytes, with characters that JSON
// escapes (<, >, ", a newline) and one of two bytes (é).
const bigLine = "line <7> \"q\" é\n"

func (ts *tools) big(_ context.Context, call *bgmcp.Call) (any, error) {
	var args struct {
		KiB int `json:"kib"`
	}
	if err := decode(call.Arguments, &args); err != nil {
		return nil, err
	}
	if args.KiB < 1 || args.KiB > 1024 {
		return nil, fmt.Errorf("kib must be between 1 and 1024, got %d", args.KiB)
	}
	return map[string]any{"kib": args.KiB, "data": strings.Repeat(bigLine, args.KiB<<10/len(bigLine))}, nil
}

func (ts *tools) ask(ctx context.Context, call *bgmcp.Call) (any, error) {
	var args struct {
		Question string `json:"question"`
	}
	if err := decode(call.Arguments, &args); err != nil {
		return nil, err
	}
	task, ok := call.Task()
	if !ok {
		return nil, errors.New("ask runs as a task only")
	}
	msg, err := task.RequestInput(ctx, args.Question)
	if err != nil {
		return nil, err
	}
	return map[string]string{"answer": msg.Content}, nil
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
