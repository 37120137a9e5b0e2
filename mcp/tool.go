package bgmcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/agent"
)

// Task support of a host tool, as its tools/list entry declares it.
const (
	TaskOptional  = "optional"  // the client chooses: a task, or a plain call
	TaskRequired  = "required"  // a plain call is refused
	TaskForbidden = "forbidden" // a task request is refused
)

// Tool is a host tool: a Go function plus the JSON Schema of its
// arguments, registered with Server.AddTool.
//
// When the client asks for task execution (a "task" in tools/call), Run
// runs as a bgtask task of the caller's owner, of type Name, and the call
// returns the task handle at once; its ctx ends when the task is cancelled
// (tasks/cancel) or the Manager shuts down. Otherwise Run runs in the
// foreground and its ctx is the request's.
//
// Run's result is JSON-encoded as the text content of the tool result, and
// is its structuredContent too when it encodes as a JSON object; a
// *mcp.CallToolResult is sent as it is. An error becomes a tool result with
// isError and the error's text, except a *jsonrpc.Error (errors.As), which
// is a protocol error: the plain call answers with it, and a task of
// 2026-07-28 ends failed with it (2025-11-25 shows the task failed with
// its message). A panic in a task is the task's failure; in
// the foreground it is a tool result with isError. Run is called once per
// call, concurrently with other calls. A task's result longer than the
// Manager's Caps.MaxResultBytes is still returned whole by tasks/result while
// the Server keeps it (see WithResultMemory).
type Tool struct {
	Name, Description string
	InputSchema       json.RawMessage // JSON Schema of the arguments; its type must be "object"
	TaskSupport       string          // TaskOptional (the default when empty), TaskRequired or TaskForbidden
	Run               func(ctx context.Context, call *Call) (any, error)

	// Prepare, when set, runs before Run on every call, in the
	// foreground with the request's ctx, to gather input the call needs
	// before it starts, and before it becomes a task above all. It returns
	// the questions to ask (a non-nil InputRequired with requests), or nil
	// to let the call run. A client of 2026-07-28 gets the questions as an
	// input-required result (resultType "input_required") and calls again
	// with its answers (call.InputResponses) and the State (call.RequestState);
	// Prepare runs again, and Run gets the Call of the round that let it run.
	// For a client of an older revision, bgmcp asks the questions itself, as
	// the session's elicitation, sampling and roots requests, up to 10
	// rounds. An error or a panic answers the call as Run's would in the
	// foreground, and no task is made. Prepare is called concurrently with
	// other calls and must not block on the client: it is one round of a
	// request.
	Prepare func(ctx context.Context, call *Call) (*InputRequired, error)
}

// hostTool is a registered Tool.
type hostTool struct {
	Tool
}

// AddTool registers a host tool. Errors: an empty name, a name taken by a
// task tool or an earlier AddTool, a nil Run, a schema that is not a JSON
// object of type "object", an unknown TaskSupport. Tools added while
// sessions are open are announced to them (tools/list_changed).
func (s *Server) AddTool(t Tool) error {
	if t.TaskSupport == "" {
		t.TaskSupport = TaskOptional
	}
	var schema struct {
		Type string `json:"type"`
	}
	switch {
	case t.Name == "":
		return errors.New("bgmcp: AddTool: empty tool name")
	case t.Run == nil:
		return fmt.Errorf("bgmcp: AddTool %q: nil Run", t.Name)
	case t.TaskSupport != TaskOptional && t.TaskSupport != TaskRequired && t.TaskSupport != TaskForbidden:
		return fmt.Errorf("bgmcp: AddTool %q: unknown TaskSupport %q", t.Name, t.TaskSupport)
	case json.Unmarshal(t.InputSchema, &schema) != nil || schema.Type != "object":
		return fmt.Errorf("bgmcp: AddTool %q: InputSchema must be a JSON object of type \"object\"", t.Name)
	}
	for _, bt := range taskToolNames {
		if bt == t.Name {
			return fmt.Errorf("bgmcp: AddTool %q: name taken by a task tool", t.Name)
		}
	}
	s.mu.Lock()
	if _, ok := s.tools[t.Name]; ok {
		s.mu.Unlock()
		return fmt.Errorf("bgmcp: AddTool %q: name already added", t.Name)
	}
	ht := &hostTool{t}
	s.tools[t.Name] = ht
	s.mu.Unlock()
	s.sdk.AddTool(&mcp.Tool{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema}, s.foreground(ht))
	return nil
}

// hostTool returns the host tool of that name, if any.
func (s *Server) hostTool(name string) (*hostTool, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tools[name]
	return t, ok
}

// taskToolNames are the names of bgtask's model-facing tools.
var taskToolNames = []string{"list_tasks", "get_task", "cancel_task", "send_message", "wait_task"}

// taskTool serves one of bgtask's model-facing tools for the caller's owner.
func (s *Server) taskTool(name string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		o, err := s.owner(ctx, req.Session)
		if err != nil {
			return errorResult(err), nil
		}
		ctx = runContext(ctx, req.Session)
		for _, t := range agent.Tools(o) {
			if t.Name == name {
				out, err := t.Call(ctx, req.Params.Arguments)
				if err != nil {
					return errorResult(err), nil
				}
				return rawResult(out), nil
			}
		}
		return nil, fmt.Errorf("bgmcp: no task tool %q", name) // unreachable: the names are bgtask's
	}
}

// foreground serves a plain (not task-augmented) call of a host tool.
func (s *Server) foreground(t *hostTool) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (res *mcp.CallToolResult, err error) {
		if t.TaskSupport == TaskRequired {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: fmt.Sprintf("Tool %s requires task augmentation (taskSupport: 'required')", t.Name)}
		}
		modern := eraOf(req.Params.Meta, req.Session).modern
		if modern {
			if _, err := s.modernCaller(ctx, req.Session); err != nil {
				return errorResult(err), nil // an anonymous caller may call it
			}
		} else if _, err := s.owner(ctx, req.Session); err != nil {
			return errorResult(err), nil
		}
		call := &Call{Arguments: req.Params.Arguments, InputResponses: req.Params.InputResponses, RequestState: req.Params.RequestState,
			ctx: ctx, session: req.Session, token: req.Params.GetProgressToken()}
		if !modern {
			if res, err := gather(ctx, req.Session, t, call); res != nil || err != nil {
				return res, err
			}
		} else if ask, res, err := prepareCall(ctx, t, call); ask != nil || res != nil || err != nil {
			if ask != nil {
				return inputRequiredResult(ask), nil // the SDK marks it input_required
			}
			return res, err
		}
		defer func() {
			if p := recover(); p != nil {
				res, err = errorResult(fmt.Errorf("bgmcp: tool %s panicked: %v", t.Name, p)), nil
			}
		}()
		v, runErr := t.Run(ctx, call)
		if rpcErr, ok := errors.AsType[*jsonrpc.Error](runErr); ok {
			return nil, rpcErr
		}
		if runErr != nil {
			return errorResult(runErr), nil
		}
		return toolResult(v)
	}
}

// errorResult is a tool result with isError and err's text.
func errorResult(err error) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}, IsError: true}
}

// toolResult turns what Run returned into a tool result.
func toolResult(v any) (*mcp.CallToolResult, error) {
	if r, ok := v.(*mcp.CallToolResult); ok && r != nil {
		return r, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return errorResult(fmt.Errorf("bgmcp: encoding the tool's result: %w", err)), nil
	}
	return rawResult(b), nil
}

// rawResult is a tool result of JSON text, structured too when it is an
// object.
func rawResult(b json.RawMessage) *mcp.CallToolResult {
	r := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}
	if len(b) > 0 && b[0] == '{' {
		r.StructuredContent = b
	}
	return r
}

// Call is one call of a host tool, as its Run sees it. Arguments are the
// client's, as they came (Run validates them; an error it returns is the
// text the client sees). A Call is safe for concurrent use.
type Call struct {
	Arguments json.RawMessage
	// InputResponses are the client's answers to the questions of the
	// previous round of the tool's Prepare, by their keys, and RequestState
	// the State of that round, as the client sent them back; both are
	// empty in the first round. They are the client's: Prepare and Run
	// check them (a key may be missing, or its answer declined).
	InputResponses mcp.InputResponseMap
	RequestState   string

	ctx     context.Context
	session *mcp.ServerSession
	token   any          // the client's progress token, or nil
	task    *bgtask.Task // the task running the call, or nil in the foreground
}

// progressEvent is the task event a progress report is recorded as.
const progressEvent = "progress"

// progressPayload is the payload of a progress event.
type progressPayload struct {
	Progress float64 `json:"progress"`
	Total    float64 `json:"total,omitempty"`
	Message  string  `json:"message,omitempty"`
}

// Progress reports how far the call got: progress out of total (0 when
// unknown), with an optional message. When the client sent a progress
// token, it becomes a notifications/progress to the calling session, in the
// order of the calls (make progress grow with each call, as MCP requires).
// In a task, it is also recorded as the task's latest progress (a custom
// event of type "progress"), which get_task shows, and the notification
// names the task in its _meta ("io.modelcontextprotocol/related-task"). The notification is
// written before Progress returns; a session that has closed meanwhile is
// ignored, so Progress never fails.
func (c *Call) Progress(progress, total float64, message string) {
	if c.task != nil {
		_ = c.task.Emit(progressEvent, progressPayload{progress, total, message})
	}
	if c.token == nil || c.session == nil {
		return
	}
	ctx := c.ctx
	params := &mcp.ProgressNotificationParams{ProgressToken: c.token, Progress: progress, Total: total, Message: message}
	if c.task != nil {
		// A task outlives its tools/call: a ctx carrying that request's
		// values (a task keeps its spawner's) would route the notification,
		// over streamable HTTP, to the request's finished stream, which drops
		// it. Unrelated to any request, it goes to the session's own stream.
		ctx = context.Background()
		params.Meta = mcp.Meta{relatedTaskKey: map[string]any{"taskId": c.task.ID()}}
	}
	_ = c.session.NotifyProgress(ctx, params)
}

// runContext puts the session on ctx as the bgtask run of the call: the
// tasks a session starts belong to its run, and cancel_task with relation
// "self" cancels them.
func runContext(ctx context.Context, ss *mcp.ServerSession) context.Context {
	if id := ss.ID(); id != "" {
		return bgtask.WithToolCall(ctx, bgtask.ToolCall{RunID: id})
	}
	return ctx
}

// Task returns the bgtask task that runs the call when the client asked for
// task execution, and false for a call in the foreground. Through it a long
// tool can ask its client a question (Task.RequestInput; goroutines of the
// task may ask several at once): the task reads as
// input_required, with the prompt as its statusMessage, until the client
// answers. A client that declared the elicitation capability and waits in
// tasks/result is sent the question there, as the tasks protocol says: an
// elicitation/create request naming the task in its _meta, whose form has
// one string field, "answer"; accepting it answers the task, declining or
// dismissing it cancels the task. Any client can answer with the
// send_message tool instead (to the task by id, in_reply_to the request id
// that get_task shows).
func (c *Call) Task() (*bgtask.Task, bool) { return c.task, c.task != nil }
