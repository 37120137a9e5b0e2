package bgmcp

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/bgtype"
)

// The 2026-07-28 revision: a stateless core, each request carrying its
// protocol version and the client's capabilities in its _meta, and tasks in
// the io.modelcontextprotocol/tasks extension (SEP-2663). A tools/call of a
// host tool that may run as a task (TaskOptional, TaskRequired) from a
// request that declared the extension answers with a task handle
// (resultType "task"); the client polls tasks/get, answers input requests
// with tasks/update and cancels with tasks/cancel. There is no tasks/list
// nor tasks/result in it.

// TasksExtension is the identifier of the MCP tasks extension of revision
// 2026-07-28, as clients declare it in their per-request capabilities and
// the server in its server/discover capabilities.
const TasksExtension = "io.modelcontextprotocol/tasks"

// Result types of the 2026-07-28 revision.
const (
	resultComplete = "complete"
	resultTask     = "task"
)

// codeMissingCapability is the error code of a request that needs a client
// capability the request did not declare (-32021 in the 2026-07-28 schema).
const codeMissingCapability = mcp.CodeMissingRequiredClientCapabilities

// era is what a request says of itself: whether it follows the 2026-07-28
// revision, and whether it declared the tasks extension.
type era struct {
	version       string // the request's revision; "" when unknown
	modern, tasks bool
}

// eraOf reads a request's era from its _meta (the 2026-07-28 revision puts
// the protocol version and the client's capabilities there), else from its
// session's initialize (older revisions).
func eraOf(meta mcp.Meta, ss *mcp.ServerSession) era {
	version, _ := meta[mcp.MetaKeyProtocolVersion].(string)
	if version == "" && ss != nil {
		if p := ss.InitializeParams(); p != nil {
			version = p.ProtocolVersion
		}
	}
	if version < ProtocolVersion {
		return era{version: version}
	}
	var caps struct {
		Extensions map[string]json.RawMessage `json:"extensions"`
	}
	if b, err := json.Marshal(meta[mcp.MetaKeyClientCapabilities]); err == nil {
		_ = json.Unmarshal(b, &caps) // not an object: no extension declared
	}
	_, tasks := caps.Extensions[TasksExtension]
	return era{version: version, modern: true, tasks: tasks}
}

// missingTasksCapability is the error of a request that needs the tasks
// extension and did not declare it.
func missingTasksCapability() error {
	data, _ := json.Marshal(map[string]any{
		"requiredCapabilities": map[string]any{"extensions": map[string]any{TasksExtension: map[string]any{}}},
	})
	return &jsonrpc.Error{Code: codeMissingCapability, Message: "Missing required client capability: " + TasksExtension, Data: data}
}

// notInRevision is the error of a 2025-11-25 tasks method asked for on the
// 2026-07-28 revision, or of an extension method asked for on an older one.
func notInRevision(method, revision string) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: fmt.Sprintf("Method not found: %s is not a method of revision %s", method, revision)}
}

// Anonymous owners. A 2026-07-28 request has no session: the owner function
// is called with the request's ctx and a session without an id, and the
// default one names nobody. Each task such a request creates is then an
// owner of its own, "mcp-anon:" and 26 random characters, and its handle,
// "anon." + those characters + "." + the task id, is the only credential
// that reaches it (the extension allows handles to be bearer tokens).
const (
	anonOwnerPrefix  = "mcp-anon:"
	anonHandlePrefix = "anon."
)

// anonHandle is the handle of a task of an anonymous owner.
func anonHandle(owner, id string) string {
	return anonHandlePrefix + strings.TrimPrefix(owner, anonOwnerPrefix) + "." + id
}

// parseAnonHandle returns the owner and task id a handle names, or false
// when it is not an anonymous handle.
func parseAnonHandle(h string) (owner, id string, ok bool) {
	rest, ok := strings.CutPrefix(h, anonHandlePrefix)
	if !ok {
		return "", "", false
	}
	secret, id, ok := strings.Cut(rest, ".")
	if !ok || secret == "" || id == "" {
		return "", "", false
	}
	return anonOwnerPrefix + secret, id, true
}

// caller is the owner of a 2026-07-28 request: the one the owner function
// names, or none (anonymous).
type caller struct {
	owner bgtask.Owner
	anon  bool
}

// modernCaller calls the owner function for a 2026-07-28 request. An error
// refuses the request (ErrNoOwner); a blank id makes it anonymous.
func (s *Server) modernCaller(ctx context.Context, ss *mcp.ServerSession) (caller, error) {
	id, err := s.cfg.ownerFunc(ctx, ss)
	if err != nil {
		return caller{}, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: fmt.Errorf("%w: %w", ErrNoOwner, err).Error()}
	}
	if strings.TrimSpace(id) == "" {
		return caller{anon: true}, nil
	}
	o, err := s.restoredOwner(ctx, id)
	if err != nil {
		return caller{}, err
	}
	return caller{owner: o}, nil
}

// handleOf is the handle a caller is given for one of its tasks.
func (c caller) handleOf(o bgtask.Owner, id string) string {
	if c.anon {
		return anonHandle(o.ID(), id)
	}
	return id
}

// modernTask finds the task a 2026-07-28 request names by its handle: one of
// the named caller's tasks, or, for an anonymous caller, the task of an
// anonymous handle. Anything else is not found, with the same text as an
// unknown id.
func (s *Server) modernTask(ctx context.Context, ss *mcp.ServerSession, handle string) (bgtask.Owner, bgtype.TaskMeta, error) {
	c, err := s.modernCaller(ctx, ss)
	if err != nil {
		return bgtask.Owner{}, bgtype.TaskMeta{}, err
	}
	if handle == "" {
		return bgtask.Owner{}, bgtype.TaskMeta{}, invalidParams("missing taskId")
	}
	if !c.anon {
		m, err := c.owner.Get(ctx, handle)
		if errors.Is(err, bgtask.ErrNotFound) {
			return c.owner, m, invalidParams("Task not found: %s", handle)
		}
		return c.owner, m, err
	}
	owner, id, ok := parseAnonHandle(handle)
	if !ok {
		return bgtask.Owner{}, bgtype.TaskMeta{}, invalidParams("Task not found: %s", handle)
	}
	o := s.m.Owner(owner)
	m, err := o.Get(ctx, id)
	if errors.Is(err, bgtask.ErrNotFound) {
		return o, m, invalidParams("Task not found: %s", handle)
	}
	if err != nil {
		return o, m, err
	}
	// Restored once its task is found: a made-up handle leaves no mark.
	if _, err := s.restoredOwner(ctx, owner); err != nil {
		return o, m, err
	}
	m, err = o.Get(ctx, id)
	return o, m, err
}

// detailedTask is a task as the tasks extension shows it (its DetailedTask):
// the task handle (CreateTaskResult, resultType "task"), or the result of
// tasks/get (resultType "complete"), with the outstanding input requests
// while it awaits input and the final result or error once it ended.
type detailedTask struct {
	mcp.ResultBase
	ResultType     string                  `json:"resultType"`
	TaskID         string                  `json:"taskId"`
	Status         string                  `json:"status"`
	StatusMessage  string                  `json:"statusMessage,omitempty"`
	CreatedAt      string                  `json:"createdAt"`
	LastUpdatedAt  string                  `json:"lastUpdatedAt"`
	TTLMs          *int64                  `json:"ttlMs"`
	PollIntervalMs int64                   `json:"pollIntervalMs,omitempty"`
	InputRequests  map[string]inputRequest `json:"inputRequests,omitempty"`
	Result         json.RawMessage         `json:"result,omitempty"`
	Error          *taskError              `json:"error,omitempty"`
}

// inputRequest is a server-to-client request a task waits on.
type inputRequest struct {
	Method string            `json:"method"`
	Params *mcp.ElicitParams `json:"params"`
}

// taskError is the JSON-RPC error of a failed task.
type taskError struct {
	Code    int64  `json:"code"`
	Message string `json:"message"`
}

// ackResult is the empty acknowledgement of tasks/update and tasks/cancel.
type ackResult struct {
	mcp.ResultBase
	ResultType string `json:"resultType"`
}

// detailOf is the extension's view of one of o's tasks, named handle:
//
//	queued, running  -> working
//	awaiting_input   -> input_required, with each open question as an elicitation/create request
//	completed        -> completed, with the tool's result (isError or not)
//	failed           -> completed, with a result with isError and the error's text, as the
//	                    call in the foreground would have answered; failed with the
//	                    error when the tool returned a *jsonrpc.Error
//	interrupted      -> failed, with an internal error (-32603): the process that ran it stopped
//	cancelled        -> cancelled
func (s *Server) detailOf(ctx context.Context, o bgtask.Owner, m bgtype.TaskMeta, handle string) *detailedTask {
	info := s.info(ctx, o, m)
	d := &detailedTask{
		ResultType:     resultComplete,
		TaskID:         handle,
		Status:         info.Status,
		StatusMessage:  info.StatusMessage,
		CreatedAt:      info.CreatedAt,
		LastUpdatedAt:  info.LastUpdatedAt,
		TTLMs:          info.TTL,
		PollIntervalMs: info.PollInterval,
	}
	switch m.Status {
	case bgtype.StatusAwaitingInput:
		for _, in := range m.OpenInputs() {
			if d.InputRequests == nil {
				d.InputRequests = map[string]inputRequest{}
			}
			d.InputRequests[in.ID] = inputRequest{
				Method: "elicitation/create",
				Params: &mcp.ElicitParams{Mode: "form", Message: in.Prompt, RequestedSchema: answerSchema},
			}
		}
	case bgtype.StatusFailed:
		if code, msg, ok := parseProtocolError(m.Error); ok {
			d.Error = &taskError{Code: code, Message: msg}
			break
		}
		fallthrough
	case bgtype.StatusCompleted:
		// The result of a 2026-07-28 tools/call says it is complete.
		d.Status, d.Result = statusCompleted, withField(s.resultOf(o, m), "resultType", `"complete"`)
		if m.Status == bgtype.StatusCompleted {
			d.StatusMessage = ""
		}
	case bgtype.StatusInterrupted:
		d.Error = &taskError{Code: jsonrpc.CodeInternalError, Message: m.Error}
	}
	return d
}

// modernCall serves a tools/call of the 2026-07-28 revision. A host tool
// that may run as a task does, when the request declared the tasks
// extension, and the answer is its handle, once the tool's Prepare asks no
// more (an input-required result before that: SEP-2663's composition of
// input rounds and tasks); a tool that requires a task refuses a request
// that did not (-32021). Every other call runs in the foreground.
func (s *Server) modernCall(ctx context.Context, req *mcp.CallToolRequest, e era, next func() (mcp.Result, error)) (mcp.Result, error) {
	t, ok := s.hostTool(req.Params.Name)
	switch {
	case !ok || t.TaskSupport == TaskForbidden:
		return next()
	case !e.tasks && t.TaskSupport == TaskRequired:
		return nil, missingTasksCapability()
	case !e.tasks:
		return next()
	}
	c, err := s.modernCaller(ctx, req.Session)
	if err != nil {
		return nil, err
	}
	// The request's session ends with the request: the task reports its
	// progress as events only.
	call := &Call{Arguments: req.Params.Arguments, InputResponses: req.Params.InputResponses, RequestState: req.Params.RequestState}
	// A round of questions comes before the task: no task is made until
	// Prepare lets the call run.
	if ask, res, err := prepareCall(ctx, t, call); err != nil {
		return nil, err
	} else if res != nil {
		return &typedResult{res, resultComplete}, nil
	} else if ask != nil {
		return &typedResult{inputRequiredResult(ask), resultInputRequired}, nil
	}
	o := c.owner
	if c.anon {
		o = s.m.Owner(anonOwnerPrefix + rand.Text())
	}
	id, err := o.Spawn(ctx, s.taskFunc(t, o, call), bgtask.WithType(t.Name), bgtask.WithDescription(t.Description))
	if err != nil {
		return nil, err
	}
	m, err := o.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	// Its seed state is working, even if it has ended already: tasks/get
	// tells its end.
	info := infoOf(m)
	return &detailedTask{
		ResultType:     resultTask,
		TaskID:         c.handleOf(o, id),
		Status:         statusWorking,
		CreatedAt:      info.CreatedAt,
		LastUpdatedAt:  info.CreatedAt,
		PollIntervalMs: pollInterval,
	}, nil
}

// modernGet serves tasks/get on the 2026-07-28 revision.
func (s *Server) modernGet(ctx context.Context, ss *mcp.ServerSession, handle string) (mcp.Result, error) {
	o, m, err := s.modernTask(ctx, ss, handle)
	if err != nil {
		return nil, err
	}
	return s.detailOf(ctx, o, m, handle), nil
}

// modernCancel serves tasks/cancel on the 2026-07-28 revision: the task is
// asked to stop, wherever it runs, and the answer is an acknowledgement at
// once (tasks/get tells when it stopped). A task that has ended already is
// acknowledged too: cancelling is cooperative, and it lost the race.
func (s *Server) modernCancel(ctx context.Context, ss *mcp.ServerSession, handle string) (mcp.Result, error) {
	o, m, err := s.modernTask(ctx, ss, handle)
	if err != nil {
		return nil, err
	}
	if !m.Status.IsTerminal() {
		if _, err := o.Cancel(ctx, m.ID); err != nil && !errors.Is(err, bgtask.ErrTerminal) {
			return nil, err
		}
	}
	return &ackResult{ResultType: resultComplete}, nil
}

// updateParams are the params of tasks/update.
type updateParams struct {
	mcp.ParamsBase
	TaskID         string                   `json:"taskId"`
	InputResponses map[string]inputResponse `json:"inputResponses"`
}

// inputResponse is the client's response to an input request: an
// elicitation result.
type inputResponse struct {
	Action  string         `json:"action"`
	Content map[string]any `json:"content,omitempty"`
}

// modernUpdate serves tasks/update: each response to one of the task's
// outstanding input requests is handed to the task, in the order the task
// asked them; the others stay outstanding (a partial update). An accepted
// one answers its request (once: a second answer to the same request, from
// any instance, finds it answered and is ignored); a declined or cancelled
// one cancels the task with a reason that says so. Responses to keys that
// are not outstanding are ignored, whatever they hold, as the extension
// says; a response to an outstanding key with an unknown action refuses
// the whole update, before any of it is handed over.
func (s *Server) modernUpdate(ctx context.Context, ss *mcp.ServerSession, p *updateParams) (mcp.Result, error) {
	if p == nil {
		return nil, invalidParams("missing taskId")
	}
	if p.InputResponses == nil {
		if p.TaskID == "" {
			return nil, invalidParams("missing taskId")
		}
		return nil, invalidParams("missing inputResponses")
	}
	o, m, err := s.modernTask(ctx, ss, p.TaskID)
	if err != nil {
		return nil, err
	}
	ack := &ackResult{ResultType: resultComplete}
	if m.Status.IsTerminal() {
		return ack, nil
	}
	var answers []bgtype.InputRequest // the outstanding ones answered, in the task's order
	for _, in := range m.OpenInputs() {
		r, ok := p.InputResponses[in.ID]
		switch {
		case !ok:
			continue
		case r.Action != "accept" && r.Action != "decline" && r.Action != "cancel":
			return nil, invalidParams("input response %q: unknown action %q (want accept, decline or cancel)", in.ID, r.Action)
		}
		answers = append(answers, in)
	}
	for _, in := range answers {
		r := p.InputResponses[in.ID]
		if r.Action != "accept" {
			reason := reasonDismissed
			if r.Action == "decline" {
				reason = reasonDeclined
			}
			if _, err := o.Cancel(ctx, m.ID, bgtask.WithReason(reason)); err != nil && !errors.Is(err, bgtask.ErrTerminal) {
				return nil, err
			}
			return ack, nil // the task ends: the other answers have no one to reach
		}
		_, err := o.Send(ctx, m.ID, bgtype.Message{From: o.ID(), Content: responseText(r.Content), InReplyTo: in.ID})
		if err != nil && !errors.Is(err, bgtask.ErrNoInputRequest) && !errors.Is(err, bgtask.ErrTerminal) {
			return nil, err
		}
	}
	return ack, nil
}

// responseText is the answer in an accepted response's content: its
// "answer" field (the form the server asked for), else the content as JSON.
func responseText(content map[string]any) string {
	if a, ok := content[answerField].(string); ok {
		return a
	}
	b, _ := json.Marshal(content) // decoded from JSON: it encodes
	return string(b)
}

// protocolError is how a task records the *jsonrpc.Error its tool returned:
// its text names the code, which the record keeps (parseProtocolError).
type protocolError struct{ err *jsonrpc.Error }

func (e protocolError) Error() string {
	return fmt.Sprintf("%s%d: %s", protocolErrorPrefix, e.err.Code, e.err.Message)
}

func (e protocolError) Unwrap() error { return e.err }

const protocolErrorPrefix = "bgmcp: JSON-RPC error "

// parseProtocolError reads the code and message of a protocolError's text.
func parseProtocolError(text string) (int64, string, bool) {
	rest, ok := strings.CutPrefix(text, protocolErrorPrefix)
	if !ok {
		return 0, "", false
	}
	num, msg, ok := strings.Cut(rest, ": ")
	if !ok {
		return 0, "", false
	}
	code, err := strconv.ParseInt(num, 10, 64)
	if err != nil {
		return 0, "", false
	}
	return code, msg, true
}

// withField sets a field of a JSON object that lacks it, keeping the rest
// byte for byte; anything but an object is returned as it is.
func withField(obj json.RawMessage, name, value string) json.RawMessage {
	var fields map[string]json.RawMessage
	if json.Unmarshal(obj, &fields) != nil {
		return obj
	}
	if _, ok := fields[name]; ok {
		return obj
	}
	fields[name] = json.RawMessage(value)
	b, err := json.Marshal(fields)
	if err != nil {
		return obj
	}
	return b
}
