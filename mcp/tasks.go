package bgmcp

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/bgtask/bgtask"
)

// relatedTaskKey is the _meta key of the task a tasks/result belongs to.
const relatedTaskKey = "io.modelcontextprotocol/related-task"

// pollInterval is the polling interval suggested to clients, in ms.
const pollInterval = 1000

// listPageSize is how many tasks a tasks/list page holds (a variable for
// tests).
var listPageSize = 50

// taskInfo is a task as the tasks protocol shows it.
type taskInfo struct {
	TaskID        string `json:"taskId"`
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage,omitempty"`
	CreatedAt     string `json:"createdAt"`
	LastUpdatedAt string `json:"lastUpdatedAt"`
	TTL           *int64 `json:"ttl"` // ms from creation the store keeps the record; null while the task runs (see WithRetainFor)
	PollInterval  int64  `json:"pollInterval,omitempty"`
}

// infoOf is the protocol view of a record, without what Server.info adds
// (the last change of a live task and the ttl of an ended one).
func infoOf(m bgtype.TaskMeta) taskInfo {
	st := StatusOf(m.Status, resultIsError(m))
	v := taskInfo{
		TaskID:        m.ID,
		Status:        st,
		CreatedAt:     m.CreatedAt.UTC().Format(time.RFC3339Nano),
		LastUpdatedAt: lastUpdate(m).UTC().Format(time.RFC3339Nano),
	}
	switch {
	case m.Status == bgtype.StatusAwaitingInput && m.Input != nil:
		v.StatusMessage = m.Input.Prompt
	case m.Status.IsTerminal():
		v.StatusMessage = m.Error
	}
	if !m.Status.IsTerminal() {
		v.PollInterval = pollInterval
	}
	return v
}

func lastUpdate(m bgtype.TaskMeta) time.Time {
	t := m.CreatedAt
	for _, u := range []time.Time{m.StartedAt, m.FinishedAt} {
		if u.After(t) {
			t = u
		}
	}
	return t
}

// resultIsError reports whether a completed task's result is a tool result
// with isError.
func resultIsError(m bgtype.TaskMeta) bool {
	if m.Status != bgtype.StatusCompleted || len(m.Result) == 0 {
		return false
	}
	var r struct {
		IsError bool `json:"isError"`
	}
	return json.Unmarshal(m.Result, &r) == nil && r.IsError
}

// taskIDParams are the params of tasks/get, tasks/result and tasks/cancel.
type taskIDParams struct {
	mcp.ParamsBase
	TaskID string `json:"taskId"`
}

// listParams are the params of tasks/list.
type listParams struct {
	mcp.ParamsBase
	Cursor string `json:"cursor,omitempty"`
}

// taskResult is the result of tasks/get and tasks/cancel: the task itself.
type taskResult struct {
	mcp.ResultBase
	taskInfo
}

// createTaskResult answers a task-augmented tools/call.
type createTaskResult struct {
	mcp.ResultBase
	Task taskInfo `json:"task"`
}

// listResult is the result of tasks/list.
type listResult struct {
	mcp.ResultBase
	Tasks      []taskInfo `json:"tasks"`
	NextCursor string     `json:"nextCursor,omitempty"`
}

// payloadResult is the result of tasks/result: the tool's result, with
// the related task in its _meta.
type payloadResult struct {
	mcp.ResultBase
	body json.RawMessage
}

func (r *payloadResult) MarshalJSON() ([]byte, error) { return r.body, nil }

// invalidParams is the protocol error for a bad task id or cursor.
func invalidParams(format string, args ...any) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf(format, args...)}
}

// addTaskMethods registers tasks/get, tasks/list, tasks/result,
// tasks/cancel and
// tasks/update of the extension. Each serves the revision of its request:
// the 2025-11-25 tasks protocol, or the tasks extension of 2026-07-28
// (modern.go), where tasks/list and tasks/result are not methods and a
// request that did not declare the extension is refused (-32021).
func (s *Server) addTaskMethods() error {
	return errors.Join(
		mcp.AddReceivingCustomMethod(s.sdk, "tasks/get", func(ctx context.Context, ss *mcp.ServerSession, p *taskIDParams) (mcp.Result, error) {
			if e := eraOf(metaOf(p), ss); e.modern {
				if !e.tasks {
					return nil, missingTasksCapability()
				}
				return s.modernGet(ctx, ss, handleOf(p))
			}
			o, m, err := s.ownedTask(ctx, ss, p)
			if err != nil {
				return nil, err
			}
			return &taskResult{taskInfo: s.info(ctx, o, m)}, nil
		}),
		mcp.AddReceivingCustomMethod(s.sdk, "tasks/list", func(ctx context.Context, ss *mcp.ServerSession, p *listParams) (mcp.Result, error) {
			var meta mcp.Meta
			if p != nil {
				meta = p.Meta
			}
			if eraOf(meta, ss).modern {
				return nil, notInRevision("tasks/list", ProtocolVersion)
			}
			return s.listTasks(ctx, ss, p)
		}),
		mcp.AddReceivingCustomMethod(s.sdk, "tasks/result", func(ctx context.Context, ss *mcp.ServerSession, p *taskIDParams) (mcp.Result, error) {
			if eraOf(metaOf(p), ss).modern {
				return nil, notInRevision("tasks/result", ProtocolVersion)
			}
			return s.taskPayload(ctx, ss, p)
		}),
		mcp.AddReceivingCustomMethod(s.sdk, "tasks/cancel", func(ctx context.Context, ss *mcp.ServerSession, p *taskIDParams) (mcp.Result, error) {
			if e := eraOf(metaOf(p), ss); e.modern {
				if !e.tasks {
					return nil, missingTasksCapability()
				}
				return s.modernCancel(ctx, ss, handleOf(p))
			}
			return s.cancelTask(ctx, ss, p)
		}),
		mcp.AddReceivingCustomMethod(s.sdk, "tasks/update", func(ctx context.Context, ss *mcp.ServerSession, p *updateParams) (mcp.Result, error) {
			var meta mcp.Meta
			if p != nil {
				meta = p.Meta
			}
			e := eraOf(meta, ss)
			switch {
			case !e.modern:
				return nil, notInRevision("tasks/update", e.version)
			case !e.tasks:
				return nil, missingTasksCapability()
			}
			return s.modernUpdate(ctx, ss, p)
		}),
	)
}

// metaOf is the _meta of a task request's params, nil without params.
func metaOf(p *taskIDParams) mcp.Meta {
	if p == nil {
		return nil
	}
	return p.Meta
}

// handleOf is the taskId of a task request's params, "" without params.
func handleOf(p *taskIDParams) string {
	if p == nil {
		return ""
	}
	return p.TaskID
}

// ownedTask finds the caller's owner and one of its tasks; another owner's
// task is not found, exactly like an unknown id.
func (s *Server) ownedTask(ctx context.Context, ss *mcp.ServerSession, p *taskIDParams) (bgtask.Owner, bgtype.TaskMeta, error) {
	o, err := s.owner(ctx, ss)
	if err != nil {
		return o, bgtype.TaskMeta{}, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: err.Error()}
	}
	if p == nil || p.TaskID == "" {
		return o, bgtype.TaskMeta{}, invalidParams("missing taskId")
	}
	m, err := o.Get(ctx, p.TaskID)
	if errors.Is(err, bgtask.ErrNotFound) {
		return o, m, invalidParams("Task not found: %s", p.TaskID)
	}
	return o, m, err
}

// listTasks serves tasks/list: the owner's tasks in creation order, a page
// at a time; the cursor is the last task of the previous page.
func (s *Server) listTasks(ctx context.Context, ss *mcp.ServerSession, p *listParams) (*listResult, error) {
	o, err := s.owner(ctx, ss)
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: err.Error()}
	}
	var all []bgtype.TaskMeta
	for m, err := range o.List(ctx) {
		if err != nil {
			return nil, err
		}
		all = append(all, m)
	}
	store.SortMetas(all)
	start := 0
	if p != nil && p.Cursor != "" {
		after, err := base64.RawURLEncoding.DecodeString(p.Cursor)
		start = -1
		for i, m := range all {
			if err == nil && m.ID == string(after) {
				start = i + 1
				break
			}
		}
		if start < 0 {
			return nil, invalidParams("Invalid cursor: %s", p.Cursor)
		}
	}
	res := &listResult{Tasks: []taskInfo{}}
	end := min(len(all), start+listPageSize)
	for _, m := range all[start:end] {
		res.Tasks = append(res.Tasks, s.info(ctx, o, m))
	}
	if end < len(all) {
		res.NextCursor = base64.RawURLEncoding.EncodeToString([]byte(all[end-1].ID))
	}
	return res, nil
}

// taskPayload serves tasks/result: it waits until the task is terminal and
// returns the tool's result (see resultOf); a task that did not complete
// gives a result with isError and the task's error text. While it waits, a
// client that declared the elicitation capability is asked each question
// the task asks (elicit).
func (s *Server) taskPayload(ctx context.Context, ss *mcp.ServerSession, p *taskIDParams) (*payloadResult, error) {
	o, _, err := s.ownedTask(ctx, ss, p)
	if err != nil {
		return nil, err
	}
	var m bgtype.TaskMeta
	if canElicit(ss) {
		m, err = s.elicitUntilEnd(ctx, ss, o, p.TaskID)
	} else {
		m, err = waitTerminal(ctx, o, p.TaskID)
	}
	if err != nil {
		return nil, err
	}
	body, err := withRelatedTask(s.resultOf(o, m), m.ID)
	if err != nil {
		return nil, err
	}
	return &payloadResult{body: body}, nil
}

// resultOf is the tool result of a terminal task, as JSON: the whole result
// the Server keeps for it, else the one its record holds (a cut copy when
// the result was too long for the record), else, for a task that did not
// complete, a result with isError and its error text.
func (s *Server) resultOf(o bgtask.Owner, m bgtype.TaskMeta) json.RawMessage {
	if m.Status != bgtype.StatusCompleted {
		b, _ := json.Marshal(errorResult(errors.New(m.Error))) // a text always encodes
		return b
	}
	if whole, ok := s.whole.get(o.ID(), m.ID); ok {
		return whole
	}
	return recordedResult(m.Result)
}

// cancelTask serves tasks/cancel: it cancels the task (its ctx ends) and
// waits until the task has stopped, so the answer shows it cancelled.
func (s *Server) cancelTask(ctx context.Context, ss *mcp.ServerSession, p *taskIDParams) (*taskResult, error) {
	o, m, err := s.ownedTask(ctx, ss, p)
	if err != nil {
		return nil, err
	}
	if m.Status.IsTerminal() {
		return nil, invalidParams("Cannot cancel task in terminal status: %s", infoOf(m).Status)
	}
	if _, err := o.Cancel(ctx, m.ID); err != nil {
		return nil, err
	}
	m, err = waitTerminal(ctx, o, m.ID)
	if err != nil {
		return nil, err
	}
	return &taskResult{taskInfo: s.info(ctx, o, m)}, nil
}

// remotePoll is how often waitTerminal reads the record of a task that
// another instance runs (a shared store).
const remotePoll = 250 * time.Millisecond

// waitTerminal waits until one of the owner's tasks is terminal: through
// the Manager when it runs here, else by reading the store every
// remotePoll (another instance runs it, and its end reaches this one
// through the store only). It returns ctx's error if ctx ends first.
func waitTerminal(ctx context.Context, o bgtask.Owner, id string) (bgtype.TaskMeta, error) {
	var tick *time.Ticker
	for {
		m, err := o.Wait(ctx, id)
		if _, failed := errors.AsType[*bgtask.TaskError](err); failed {
			return m, nil // terminal: the record says how it failed
		}
		if !errors.Is(err, bgtask.ErrNotLive) {
			return m, err
		}
		if tick == nil {
			tick = time.NewTicker(remotePoll)
			defer tick.Stop()
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return bgtype.TaskMeta{}, ctx.Err()
		}
	}
}

// taskFunc is the function of a task-mode call of t for owner o: it runs t
// with call (its ctx and task set) and returns what the record keeps, the
// tool result as JSON, cut when longer than the Manager's result cap, the
// whole one then kept by the Server (WithResultMemory).
func (s *Server) taskFunc(t *hostTool, o bgtask.Owner, call *Call) bgtask.Func {
	return func(ctx context.Context, task *bgtask.Task) (any, error) {
		c := *call
		c.ctx, c.task = ctx, task
		v, err := t.Run(ctx, &c)
		if rpcErr, ok := errors.AsType[*jsonrpc.Error](err); ok {
			return nil, protocolError{rpcErr}
		}
		if err != nil {
			return nil, err
		}
		res, err := toolResult(v)
		if err != nil {
			return nil, err
		}
		record, whole := recordResult(res, s.m.MaxResultBytes())
		if whole != nil {
			s.whole.keep(o.ID(), task.ID(), whole)
		}
		return record, nil
	}
}
