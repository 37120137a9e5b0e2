package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	bgmcp "github.com/bgtask/bgtask/mcp"
)

// addTaskTools adds the fixtures the tasks extension's scenarios call, as
// bgmcp host tools.
func addTaskTools(s *bgmcp.Server) error {
	object := json.RawMessage(`{"type":"object"}`)
	tools := []bgmcp.Tool{
		{
			Name: "greet", Description: "Greets someone at once (never a task).", TaskSupport: bgmcp.TaskForbidden,
			InputSchema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}}}`),
			Run: func(_ context.Context, call *bgmcp.Call) (any, error) {
				var args struct{ Name string }
				_ = json.Unmarshal(call.Arguments, &args)
				return text("Hello, " + args.Name + "!"), nil
			},
		},
		{
			Name: "slow_compute", Description: "Computes for the given seconds.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"seconds":{"type":"number"},"label":{"type":"string"}}}`),
			Run: func(ctx context.Context, call *bgmcp.Call) (any, error) {
				var args struct {
					Seconds float64
					Label   string
				}
				_ = json.Unmarshal(call.Arguments, &args)
				select {
				case <-time.After(time.Duration(args.Seconds * float64(time.Second))):
					return text("computed " + args.Label), nil
				case <-ctx.Done():
					return nil, context.Cause(ctx)
				}
			},
		},
		{
			Name: "failing_job", Description: "A job whose tool reports an error.", TaskSupport: bgmcp.TaskRequired, InputSchema: object,
			Run: func(context.Context, *bgmcp.Call) (any, error) { return nil, errors.New("the job failed") },
		},
		{
			Name: "protocol_error_job", Description: "A job that fails at the protocol level.", TaskSupport: bgmcp.TaskRequired, InputSchema: object,
			Run: func(context.Context, *bgmcp.Call) (any, error) {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the job's backend failed"}
			},
		},
		{
			Name: "confirm_delete", Description: "Asks before deleting a file.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"filename":{"type":"string"}}}`),
			Run: func(ctx context.Context, call *bgmcp.Call) (any, error) {
				var args struct{ Filename string }
				_ = json.Unmarshal(call.Arguments, &args)
				task, ok := call.Task()
				if !ok {
					return text("not deleted: " + args.Filename + " (ask as a task)"), nil
				}
				answer, err := task.RequestInput(ctx, "Delete "+args.Filename+"?")
				if err != nil {
					return nil, err
				}
				return text(fmt.Sprintf("deleted %s (%s)", args.Filename, answer.Content)), nil
			},
		},
		{
			// Two questions open at once, each asked by a goroutine of the
			// task: the client may answer them together or one by one.
			Name: "multi_input", Description: "Asks two questions at once.", InputSchema: object,
			Run: func(ctx context.Context, call *bgmcp.Call) (any, error) {
				task, ok := call.Task()
				if !ok {
					return text("no questions outside a task"), nil
				}
				questions := []string{"Your name?", "Confirm?"}
				answers := make([]string, len(questions))
				errs := make([]error, len(questions))
				var wg sync.WaitGroup
				for i, q := range questions {
					wg.Go(func() {
						a, err := task.RequestInput(ctx, q)
						answers[i], errs[i] = a.Content, err
					})
				}
				wg.Wait()
				if err := errors.Join(errs...); err != nil {
					return nil, err
				}
				return text(fmt.Sprint(answers)), nil
			},
		},
		{
			// An input round before the task: the name is asked with an
			// input-required result, and the task is made once it came.
			Name: "test_tool_with_task", Description: "Asks a name, then greets it as a task.", TaskSupport: bgmcp.TaskRequired, InputSchema: object,
			Prepare: func(_ context.Context, call *bgmcp.Call) (*bgmcp.InputRequired, error) {
				if name, _ := acceptedContent(call.InputResponses, "user_name")["name"].(string); name != "" {
					return nil, nil
				}
				return &bgmcp.InputRequired{Requests: mcp.InputRequestMap{
					"user_name": &mcp.ElicitParams{Message: "What is your name?", RequestedSchema: nameElicitSchema()},
				}}, nil
			},
			Run: func(_ context.Context, call *bgmcp.Call) (any, error) {
				name, _ := acceptedContent(call.InputResponses, "user_name")["name"].(string)
				return text("Hello, " + name + "!"), nil
			},
		},
	}
	for _, t := range tools {
		if err := s.AddTool(t); err != nil {
			return err
		}
	}
	return nil
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}
