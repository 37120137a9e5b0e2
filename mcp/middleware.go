package bgmcp

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/bgtask/bgtask"
)

// middleware adds the tasks protocol to the SDK's handling: the tasks
// capability in initialize, each host tool's execution.taskSupport in
// tools/list, and task-augmented tools/call.
func (s *Server) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		ss, _ := req.GetSession().(*mcp.ServerSession)
		if extra := req.GetExtra(); ss != nil && extra != nil && extra.Header != nil {
			s.track(ss) // over HTTP
		}
		switch method {
		case "tools/call":
			if r, ok := req.(*mcp.CallToolRequest); ok {
				task, asked := takeTaskRequest(r.Params)
				if e := eraOf(r.Params.Meta, ss); e.modern {
					// The extension has no "task" param: the server decides.
					return s.modernCall(ctx, r, e, func() (mcp.Result, error) { return next(ctx, method, req) })
				}
				if asked {
					return s.spawnCall(ctx, r, task)
				}
			}
		case "subscriptions/listen":
			// Task status notifications are not offered (decision 712): the
			// acknowledgement names no task, so the client polls tasks/get.
			// Asking for them without the extension is refused, as it says.
			if r, ok := req.(*mcp.SubscriptionsListenRequest); ok && r.Params != nil {
				if _, asked := r.Params.Meta[listenMetaKey]; asked {
					delete(r.Params.Meta, listenMetaKey)
					if e := eraOf(r.Params.Meta, ss); !e.tasks {
						return nil, missingTasksCapability()
					}
				}
			}
		case "server/discover":
			res, err := next(ctx, method, req)
			if r, ok := res.(*mcp.DiscoverResult); ok && err == nil && r.Capabilities != nil {
				r.Capabilities.AddExtension(TasksExtension, nil) // the SDK made these capabilities for this result
			}
			return res, err
		case "initialize":
			res, err := next(ctx, method, req)
			if r, ok := res.(*mcp.InitializeResult); ok && err == nil {
				if ss != nil {
					// The session's owner is its opener's: over HTTP, ctx
					// carries the values of the request that opened it.
					// Without one yet, a later request names it.
					_, _ = s.sessionOwner(ctx, ss)
				}
				return &initResult{r}, nil
			}
			return res, err
		case "tools/list":
			var meta mcp.Meta
			if r, ok := req.(*mcp.ListToolsRequest); ok && r.Params != nil {
				meta = r.Params.Meta
			}
			if eraOf(meta, ss).modern {
				break // the extension has no execution.taskSupport
			}
			res, err := next(ctx, method, req)
			if r, ok := res.(*mcp.ListToolsResult); ok && err == nil {
				return &toolsResult{ListToolsResult: r, support: s.taskSupport}, nil
			}
			return res, err
		}
		return next(ctx, method, req)
	}
}

// taskSupport is the execution.taskSupport of a tool: its own for a host
// tool, forbidden for the task tools.
func (s *Server) taskSupport(name string) string {
	if t, ok := s.hostTool(name); ok {
		return t.TaskSupport
	}
	return TaskForbidden
}

// taskRequest is the "task" of a task-augmented request.
type taskRequest struct {
	TTL *int64 `json:"ttl,omitempty"`
}

// takeTaskRequest removes the task request that taskTransport or
// Server.serveHTTP moved into p's _meta, and returns it.
func takeTaskRequest(p *mcp.CallToolParamsRaw) (taskRequest, bool) {
	var tr taskRequest
	if p == nil || p.Meta == nil {
		return tr, false
	}
	v, ok := p.Meta[taskMetaKey]
	if !ok {
		return tr, false
	}
	delete(p.Meta, taskMetaKey)
	if b, err := json.Marshal(v); err == nil {
		_ = json.Unmarshal(b, &tr)
	}
	return tr, true
}

// spawnCall serves a task-augmented tools/call: the call becomes a task of
// the caller's owner at once (once the tool's Prepare, if any, has its
// answers), and the answer is its handle.
func (s *Server) spawnCall(ctx context.Context, req *mcp.CallToolRequest, _ taskRequest) (mcp.Result, error) {
	name := req.Params.Name
	t, ok := s.hostTool(name)
	switch {
	case !ok && slices.Contains(taskToolNames, name), ok && t.TaskSupport == TaskForbidden:
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: fmt.Sprintf("Tool %s does not support task augmentation (taskSupport: 'forbidden')", name)}
	case !ok:
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown tool %q", name)}
	}
	o, err := s.owner(ctx, req.Session)
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: err.Error()}
	}
	session := req.Session
	call := &Call{Arguments: req.Params.Arguments, session: session, token: req.Params.GetProgressToken()}
	// Its client knows no input-required result: Prepare's questions are
	// put to it before the task is made.
	if res, err := gather(ctx, session, t, call); err != nil {
		return nil, err
	} else if res != nil {
		return res, nil
	}
	id, err := o.Spawn(runContext(ctx, session), s.taskFunc(t, o, call),
		bgtask.WithType(name), bgtask.WithDescription(t.Description))
	if err != nil {
		return nil, err
	}
	m, err := o.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	// A task begins working (the revision's rule), even one that has
	// ended already: tasks/get tells its end.
	info := infoOf(m)
	info.Status, info.StatusMessage, info.LastUpdatedAt, info.PollInterval = statusWorking, "", info.CreatedAt, pollInterval
	return &createTaskResult{Task: info}, nil
}

// initResult is an initialize result with the tasks capability.
type initResult struct{ *mcp.InitializeResult }

func (r *initResult) MarshalJSON() ([]byte, error) {
	return addFields(r.InitializeResult, func(obj map[string]json.RawMessage) error {
		caps := map[string]json.RawMessage{}
		if c, ok := obj["capabilities"]; ok {
			if err := json.Unmarshal(c, &caps); err != nil {
				return err
			}
		}
		caps["tasks"] = json.RawMessage(`{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}`)
		b, err := json.Marshal(caps)
		obj["capabilities"] = b
		return err
	})
}

// toolsResult is a tools/list result with each tool's execution.taskSupport.
type toolsResult struct {
	*mcp.ListToolsResult
	support func(name string) string
}

func (r *toolsResult) MarshalJSON() ([]byte, error) {
	return addFields(r.ListToolsResult, func(obj map[string]json.RawMessage) error {
		var tools []map[string]json.RawMessage
		if err := json.Unmarshal(obj["tools"], &tools); err != nil {
			return err
		}
		for _, t := range tools {
			var name string
			_ = json.Unmarshal(t["name"], &name)
			b, err := json.Marshal(map[string]string{"taskSupport": r.support(name)})
			if err != nil {
				return err
			}
			t["execution"] = b
		}
		b, err := json.Marshal(tools)
		obj["tools"] = b
		return err
	})
}

// addFields marshals v as a JSON object, edited by edit.
func addFields(v any, edit func(map[string]json.RawMessage) error) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(b, &obj); err != nil {
		return nil, err
	}
	if err := edit(obj); err != nil {
		return nil, err
	}
	return json.Marshal(obj)
}
