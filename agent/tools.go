package agent

import (
	"context"
	"encoding/json"
	"time"

	"github.com/bgtask/bgtask"

	"github.com/bgtask/bgtask/bgtype"
)

// Tool is one model-facing tool, independent of any agent framework: a
// host wraps each one in its framework's tool type, passing the model's
// arguments to Call as they came and the result back as it is.
//
// Call is safe for concurrent use. Its ctx is the tool call's: it carries
// the scope (see Tools) and, when it ends, stops a wait_task wait.
type Tool struct {
	Name        string
	Description string
	// Schema is the JSON Schema (2020-12) of the arguments, in the subset
	// that OpenAI's strict mode, Anthropic's input_schema (with strict
	// tool use too) and Gemini take as it is (Gemini's "parameters" take
	// the form GeminiParameters returns): every object has
	// "additionalProperties": false and lists every key as required; a key
	// that may be unset is nullable ("type": ["string","null"]) and null
	// means unset. It has no oneOf, anyOf, allOf, if/then, maxLength,
	// uniqueItems, minimum or maximum.
	//
	// A call the schema accepts, Call accepts too, save for the rules the
	// subset cannot say, which Call refuses with the errors Tools
	// lists: a text longer than its cap, a status listed twice, an integer
	// out of range, and a "name" or "in_reply_to" that the relation needs
	// or refuses. The descriptions in the schema tell the model these
	// rules. Call also reads a key left out as null, where the schema
	// wants every key written (strict mode makes the model write them).
	Schema json.RawMessage
	// Call runs the tool. A result is JSON; an error is either a bad
	// argument (matching ErrToolArguments, nothing happened) or the call
	// could not run (bgtype.ErrNotFound, bgtask.ErrClosed, a Store error...).
	Call func(ctx context.Context, args json.RawMessage) (json.RawMessage, error)
}

// ToolOption configures Tools.
type ToolOption func(*toolConfig)

type toolConfig struct {
	waitMax      int // seconds
	onSelfCancel func(ctx context.Context)
}

// WithWaitLimit caps wait_task's timeout_seconds at limit, rounded down to
// whole seconds, between 1 s and the default cap of 300 s; the schema shows
// the cap, and the default timeout (30 s) is lowered to it if needed.
func WithWaitLimit(limit time.Duration) ToolOption {
	return func(c *toolConfig) { c.waitMax = min(max(1, int(limit/time.Second)), waitMaxSeconds) }
}

// WithOnSelfCancel sets the function cancel_task calls after it cancelled the
// current run (relation "self" in a run scope): the agent loop cancels the
// run's context there. It runs on the tool call's goroutine with the call's
// ctx, after the run's tasks were signalled; a panic in it is recovered and
// logged. It is not called in a task scope, where the task's own context is
// cancelled with its tree.
func WithOnSelfCancel(f func(ctx context.Context)) ToolOption {
	return func(c *toolConfig) { c.onSelfCancel = f }
}

// Tools returns the model-facing tools of the owner, in this order:
// list_tasks, get_task, cancel_task, send_message, wait_task. They see and
// act on the owner's tasks only: another owner's task is "not found",
// never revealed.
//
// # Scope
//
// cancel_task and send_message act relative to the caller, read from the
// call's ctx:
//
//   - the current task is Owner.CurrentTask(ctx) (bgtask.TaskFromContext), if it is the owner itself
//     (a sub-agent's loop runs its tools, from bgtask.Task.Agent, with the
//     sub-agent's context) or one of the owner's tasks; any other task in
//     ctx is ignored;
//   - otherwise the current run is ToolCallFromContext(ctx).RunID.
//
// Tasks that a host's own tools spawn with the call's ctx (bgtask.WithToolCall)
// carry the call's run, call and agent ids, so cancel_task finds them as
// children of the run.
//
// # Tools
//
//	list_tasks   {"status":[s,...]|null, "type":t|null, "tag":g|null, "limit":1..200|null (50), "cursor":c|null}
//	  → {"tasks":[{task_id,name,task_type,status,description,tags?,parent_task_id?,created_at,finished_at?,error_kind?,
//	      progress?:{done,total?,message?,at?},latest_event?:{event_type,payload,at,count}}],"total":n,"next_cursor"?:c}
//	  A page of the owner's tasks in creation order (then by id), at most
//	  limit of them: those with one of the statuses (distinct, at least
//	  one), of the type and carrying the tag (WithTags), when given.
//	  total counts all the owner's tasks that match; next_cursor, absent on the last page, gets the next
//	  page when passed as cursor with the same filter. A cursor is a
//	  position (a creation time and an id), not a task: tasks spawned or
//	  forgotten between two pages neither repeat nor skip one, and it only
//	  ever positions a page within the owner's own tasks. A description is
//	  cut to 200 bytes and a type to 128, with "…" (get_task shows them
//	  whole). error_kind says why a failed or interrupted task ended.
//	  progress is the latest the task reported (Task.ReportProgress: done
//	  out of total, a message); latest_event is the latest custom event of
//	  a task this process runs (bgtask.Owner.LatestEvent), left out when it is that
//	  progress report itself, so a task shows one progress.
//	get_task     {"task_id":id, "output_since":0..2^50|null, "output_tail":1..8192|null}
//	  → {"task":{…,started_at?,result?,error?,cancel_reason?,input_request?:{id,prompt},more_input_requests?:[{id,prompt}],idempotency_key?,output_bytes?},
//	     "messages":[{id,direction,from,content,truncated?,in_reply_to?,at}],
//	     "output"?:{text,offset,next_offset,dropped_bytes,total_bytes,running}, "output_error"?:text}
//	  The record, {…} being the fields list_tasks shows (its description
//	  and type whole), with the result when completed, the error when
//	  failed, cancelled or interrupted, the open input request (the oldest,
//	  and the others when the task asked several at once) and the
//	  idempotency key (WithIdempotencyKey); and the last 20 messages sent
//	  to the task or by it, oldest first (Owner.Messages), a content cut to
//	  4 KiB marked truncated. output_bytes is how much the task wrote to
//	  its output (bgtask.Task.Output). With output_since (or output_tail)
//	  the result has the output too (bgtask.Owner.ReadOutput): at most 8 KiB
//	  from that offset (or the last output_tail bytes), the offset to read
//	  on from, the bytes the buffer dropped before it, the size written,
//	  and whether the task may write more; a model that reads from each
//	  next_offset in turn sees every byte once. Output kept in the memory
//	  of a fleet's instance that is gone is lost: output_error says so,
//	  and the rest of the answer stands (wait_task the same).
//	cancel_task  {"target":{"relation":"self","name":null}|{"relation":"child","name":n}, "reason":r|null}
//	  → {"status":"accepted","root_task_id":id,"cancelled_count":n}
//	  cancelled_count is the number of tasks this call signalled, nothing
//	  else (not the run, not a task signalled before). self in a task scope
//	  cancels the task and its descendants; self in a run scope cancels the
//	  owner's run (Owner.CancelRun: its tasks and their descendants, never
//	  another owner's run of the same id) and calls WithOnSelfCancel. A self
//	  that signals nothing says why, with cancelled_count 0:
//	    {"status":"already_cancelled","root_task_id":id,"cancelled_count":0}  the task or run was cancelled before
//	    {"status":"nothing_to_cancel","root_task_id":id,"cancelled_count":0}  the run has no live task (it is
//	        cancelled now all the same), or the task has ended
//	  child is any of the owner's tasks, as list_tasks shows them,
//	  whichever run or task started it (one that another instance runs,
//	  with a SharedStore, included): by task_id, else by name the one
//	  non-terminal task of that name, else the latest ended one of that
//	  name (task_not_running). It is cancelled with its descendants. A task
//	  still winding down from an earlier cancel is accepted with
//	  cancelled_count 0. A sub-agent's own tasks are the sub-agent's, not
//	  the owner's: cancelling the sub-agent cancels them.
//	send_message {"to":{"relation":"child","name":n}|{"relation":"parent","name":null},"message":s,"in_reply_to":id|null}
//	  → {"status":"delivered","message_id":id}
//	  child is one of the owner's non-terminal tasks, by id, then by name
//	  (whichever run started it, as cancel_task finds it): a
//	  sub-agent gets the message in its inbox; with in_reply_to, the message
//	  answers the task's open input request (a plain task too), which then
//	  runs again. The message is from the current task, else the call's
//	  AgentID, else the owner. parent needs a current task: the task sends
//	  the message to its owner (EventTypeMessage, which every wake policy
//	  delivers). Both directions are kept in the task's history.
//	wait_task    {"task_id":id, "timeout_seconds":1..300|null (30), "output_since":0..2^50|null}
//	  → {"task":{…},"timed_out":false} when the task is terminal or awaiting input;
//	    {"task":{…},"timed_out":false,"message":"task <id> wrote new output"} with output_since, on new output;
//	    {"task":{…},"timed_out":true,"message":"task <id> still <status> after <n>s"}
//	  The task as get_task shows it (without latest_event). With
//	  output_since, the wait also ends when the task has written past that
//	  offset, and every result has "output" as get_task's from that offset.
//	  A terminal task's end is the result: its event is not delivered
//	  again (the next step does not show it, a restart does not announce
//	  it). A task that this process does not run and that is neither terminal
//	  nor awaiting input is returned at once, timed_out false, with the
//	  message "task <id> is <status> but not run by this process: wait_task
//	  cannot wait for it".
//
// # Soft failures
//
// A valid call that could not act returns JSON with "status":"failed" and
// no error:
//
//	cancel_task  {"status":"failed","root_task_id":<name given>,"cancelled_count":0,"error":"task_not_found"}
//	                 no such task: an unknown id or another owner's, a name none of the owner's tasks has
//	             {"status":"failed","root_task_id":<its id>,"cancelled_count":0,"error":"task_not_running"}
//	                 the child has already ended (completed, failed, cancelled or interrupted)
//	             {"status":"failed","root_task_id":<name given>,"cancelled_count":0,"error":"task_name_ambiguous","message":m}
//	                 several non-terminal tasks of the owner have that name (processes sharing a Store
//	                 keep names unique each for its own tasks only); m names their ids
//	send_message {"status":"failed","error":"recipient_not_found"}    no such non-terminal task of the owner
//	             {"status":"failed","error":"recipient_unavailable"}  a plain task without in_reply_to; a
//	                 sub-agent not run by this process or whose inbox has closed; parent without a
//	                 current task, a parent sub-agent that has ended, or an owner's inbox that
//	                 closed without a fallback (a closed inbox with one, such as a Plugin's, takes it)
//	             {"status":"failed","error":"no_input_request"}       in_reply_to names no open request of the task
//	             {"status":"failed","error":"recipient_ambiguous","message":m}
//	                 several non-terminal tasks of the owner have that name; m names their ids
//
// # Errors
//
// Bad arguments give an error that matches ErrToolArguments, has no effect,
// and reads exactly (paths name nested fields, as in "target.name"). The
// ones marked * are rules the Schema cannot say (see Tool.Schema): a host
// that validates a call against the Schema may still get them.
//
//	invalid arguments: not a JSON object                  empty, null, an array, a string, a number
//	invalid arguments: malformed JSON                     a syntax error
//	invalid arguments: trailing data after the JSON object
//	invalid arguments: unknown field "<path>"             a key the schema does not have (keys match exactly)
//	invalid arguments: missing "<path>"                   a field that cannot be unset is absent or null
//	                                                      (null is absent)
//	invalid arguments: missing "target.name"            * relation "child" with name null or absent
//	invalid arguments: missing "to.name"                * relation "child" with name null or absent
//	invalid arguments: "<path>" must be <kind>            a string, an object, an array or an integer;
//	                                                      "status[<i>]" names an element of "status"
//	invalid arguments: "<path>" is blank                  an id, name, type, message or reason that is empty or spaces
//	                                                      (unicode.IsSpace; the schema's "pattern" says the same)
//	invalid arguments: "<path>" is longer than <n> characters
//	                                                    * 128 for an id, name or type, 16384 for a message, 272
//	                                                      for a cursor (characters: Unicode code points)
//	invalid arguments: unknown status "<s>"; valid: queued, running, awaiting_input, completed, failed, cancelled, interrupted
//	invalid arguments: "status" is empty
//	invalid arguments: "status" lists "<s>" twice       *
//	invalid arguments: "limit" must be from 1 to 200    * an integer out of range (a huge one too)
//	invalid arguments: "cursor" is not a next_cursor of list_tasks
//	invalid arguments: unknown relation "<r>" in "target.relation"; valid: self, child
//	invalid arguments: unknown relation "<r>" in "to.relation"; valid: child, parent
//	invalid arguments: "target.name" is not allowed with relation "self"       *
//	invalid arguments: "to.name" is not allowed with relation "parent"         *
//	invalid arguments: "in_reply_to" is not allowed with relation "parent"     *
//	invalid arguments: "timeout_seconds" must be from 1 to <max>             *
//	invalid arguments: "output_since" must be from 0 to 1125899906842624     *
//	invalid arguments: "output_tail" must be from 1 to 8192                   *
//	invalid arguments: "output_tail" is not allowed with "output_since"      *
//
// Ids and names are trimmed of surrounding spaces; a message's content is
// kept as given. A number is an integer when its value is one, however it
// is written (30, 30.0, 3e1), and exactly (1.0000000000000001 is not). A
// key given twice counts once, with its last value, as JSON Schema
// validators read it. A key left out reads as null, so the optional ones
// may be left out. The arguments are checked before anything else, in
// this order: syntax, trailing data, unknown keys, then each field in the
// schema's order. Execution errors:
//
//	task not found: <id>          get_task, wait_task: unknown id or another owner's (matches bgtype.ErrNotFound)
//	current_task_unavailable      cancel_task without a current task or run (matches ErrNoCurrentTask)
//	bgtask: owner id is empty     every tool of an Owner whose id is empty or blank (bgtype.ErrInvalidOwner)
//	bgtask: manager closed        cancel_task, send_message after Shutdown (bgtask.ErrClosed); reads go on working
//
// and the Store's errors, or ctx's when a wait_task call's ctx ends.
func Tools(o bgtask.Owner, opts ...ToolOption) []Tool {
	ow := owner{o}
	cfg := toolConfig{waitMax: waitMaxSeconds}
	for _, opt := range opts {
		opt(&cfg)
	}
	tools := []Tool{
		ow.listTasksTool(),
		ow.getTaskTool(),
		ow.cancelTaskTool(cfg),
		ow.sendMessageTool(),
		ow.waitTaskTool(cfg),
	}
	if !bgtype.ValidOwner(o.ID()) { // refused before the arguments are even read
		for i := range tools {
			tools[i].Call = func(context.Context, json.RawMessage) (json.RawMessage, error) { return nil, bgtype.ErrInvalidOwner }
		}
	}
	return tools
}

// toolScope is who calls a tool, read from the call's ctx.
type toolScope struct {
	task *bgtask.Task    // the current task, or nil
	run  string          // the current run when there is no current task
	call bgtask.ToolCall // the call's lineage, if any
}

func (o owner) scope(ctx context.Context) toolScope {
	var s toolScope
	s.task, _ = o.CurrentTask(ctx)
	if c, ok := bgtask.ToolCallFromContext(ctx); ok {
		s.call = c
		if s.task == nil && bgtype.ValidOwner(c.RunID) {
			s.run = c.RunID
		}
	}
	return s
}

// sender is the From of a message the caller sends: the current task, else
// the calling agent, else the owner.
func (s toolScope) sender(owner string) string {
	switch {
	case s.task != nil:
		return s.task.ID()
	case s.call.AgentID != "":
		return s.call.AgentID
	}
	return owner
}

// toolTask is a task as the tools show it: no owner, stack, instance or
// attempt (the model has no use for them; a stack trace would only distract
// it).
type toolTask struct {
	TaskID       string               `json:"task_id"`
	Name         string               `json:"name"`
	TaskType     string               `json:"task_type"`
	Status       bgtype.Status        `json:"status"`
	Description  string               `json:"description"`
	Tags         []string             `json:"tags,omitempty"`
	ParentTaskID string               `json:"parent_task_id,omitempty"`
	CreatedAt    time.Time            `json:"created_at"`
	StartedAt    *time.Time           `json:"started_at,omitempty"` // get_task and wait_task only
	FinishedAt   time.Time            `json:"finished_at,omitzero"`
	Result       json.RawMessage      `json:"result,omitempty"`
	Error        string               `json:"error,omitempty"`
	ErrorKind    bgtype.ErrorKind     `json:"error_kind,omitempty"`    // failed and interrupted tasks
	CancelReason string               `json:"cancel_reason,omitempty"` // get_task and wait_task only
	InputRequest *bgtype.InputRequest `json:"input_request,omitempty"`
	LatestEvent  *toolEvent           `json:"latest_event,omitempty"` // a live task's latest custom event
	// The task's other open input requests, when its goroutines ask at
	// once (input_request is the oldest).
	MoreInputRequests []bgtype.InputRequest `json:"more_input_requests,omitempty"`
	// The task's progress (Task.ReportProgress), the latest one reported,
	// and its idempotency key (get_task and wait_task only).
	Progress       *bgtype.Progress `json:"progress,omitempty"`
	IdempotencyKey string           `json:"idempotency_key,omitempty"`
	// How many bytes the task wrote to its output (bgtask.Task.Output),
	// get_task and wait_task only: read them with output_since.
	OutputBytes int64 `json:"output_bytes,omitempty"`
	// A resumable task's attempts (none for a closure's): which attempt
	// runs (or ran last) of how many, when it was resumed from the queue,
	// when its last checkpoint was saved, why the previous attempt ended.
	Attempt      int64      `json:"attempt,omitempty"`
	MaxAttempts  int        `json:"max_attempts,omitempty"`
	ResumedAt    *time.Time `json:"resumed_at,omitempty"`
	CheckpointAt *time.Time `json:"checkpoint_at,omitempty"`
	LastError    string     `json:"last_error,omitempty"`
}

// attemptView fills v with a resumable task's attempts.
func attemptView(v *toolTask, m *bgtype.TaskMeta) {
	r := m.Resume
	if r == nil {
		return
	}
	v.Attempt, v.MaxAttempts = min(r.Counted(m.Attempt), r.Limit()), int(r.Limit())
	if !r.ResumedAt.IsZero() {
		v.ResumedAt = &r.ResumedAt
	}
	if !r.SavedAt.IsZero() {
		v.CheckpointAt = &r.SavedAt
	}
	v.LastError = cutText(r.LastError, listDescriptionMax)
}

// toolEvent is how the tools show bgtask.Owner.LatestEvent, a live task's latest
// custom event.
type toolEvent struct {
	EventType string          `json:"event_type"`
	Payload   json.RawMessage `json:"payload"`
	At        time.Time       `json:"at"`
	Count     int             `json:"count"`
}

// withLatestEvent adds the task's latest custom event to v, if it has one
// that is not the progress v shows already (see shownEvent).
func (o owner) withLatestEvent(v toolTask) toolTask {
	if p, ok := o.LatestEvent(v.TaskID); ok && shownEvent(p, v.Progress) {
		v.LatestEvent = &toolEvent{p.EventType, p.Payload, p.At, p.Count}
	}
	return v
}

// listView is the short form list_tasks shows, its description and type
// capped.
func listView(m bgtype.TaskMeta) toolTask {
	v := taskView(m)
	v.Description = cutText(v.Description, listDescriptionMax)
	v.TaskType = cutText(v.TaskType, argTextMax)
	if p := v.Progress; p != nil && len(p.Message) > listDescriptionMax {
		cut := *p
		cut.Message = cutText(p.Message, listDescriptionMax)
		v.Progress = &cut
	}
	return v
}

// taskView is the fields every tool shows.
func taskView(m bgtype.TaskMeta) toolTask {
	v := toolTask{
		TaskID:       m.ID,
		Name:         m.Name,
		TaskType:     m.Type,
		Status:       m.Status,
		Description:  m.Description,
		Tags:         m.Tags,
		ParentTaskID: m.Parent.TaskID,
		CreatedAt:    m.CreatedAt,
		FinishedAt:   m.FinishedAt,
		ErrorKind:    m.ErrorKind,
		// The record's progress: its message is the task's text, escaped like every other (toolJSON).
		Progress: m.Progress,
	}
	attemptView(&v, &m)
	return v
}

// fullView is the form get_task and wait_task show, with the size of the
// task's output: what this instance keeps of it, or the terminal record's,
// which says it on every instance of a fleet (the task may have run on
// another), whichever is larger (the output of an ended task this
// instance keeps may have been forgotten).
func (o owner) fullView(m bgtype.TaskMeta) toolTask {
	v := fullView(m)
	v.OutputBytes = max(o.OutputSize(m.ID), m.OutputBytes)
	return v
}

// fullView is the form get_task and wait_task show, without the output.
func fullView(m bgtype.TaskMeta) toolTask {
	v := taskView(m)
	if !m.StartedAt.IsZero() {
		v.StartedAt = &m.StartedAt
	}
	switch m.Status {
	case bgtype.StatusCompleted:
		v.Result = m.Result
		if len(v.Result) == 0 {
			v.Result = json.RawMessage("null")
		}
	case bgtype.StatusFailed, bgtype.StatusCanceled, bgtype.StatusInterrupted:
		v.Error = m.Error
	}
	v.CancelReason = m.CancelReason
	v.InputRequest, v.MoreInputRequests = m.Input, m.MoreInput
	v.IdempotencyKey = m.IdempotencyKey
	return v
}

// toolJSON encodes a tool's result with <, > and & escaped (\u003c …), as
// the plugin's envelopes are: whatever a task wrote, a tool result never
// holds a raw tag the model could take for the plugin's own.
func toolJSON(v any) (json.RawMessage, error) {
	return json.Marshal(v)
}

// owner is the Owner the tools act for; the tools' helpers are its methods.
type owner struct{ bgtask.Owner }

// latestProgress returns meta with the latest progress its task reported
// (Owner.LatestProgress): the record is written at most once per
// progress interval, so while this Manager runs the task, a later report
// may be in memory only. What the model sees of a task's progress is then
// one value, the latest, wherever it is shown.
func (o owner) latestProgress(meta bgtype.TaskMeta) bgtype.TaskMeta {
	if live, ok := o.LatestProgress(meta.ID); ok { // what the record holds, or later
		meta.Progress = &live
	}
	return meta
}

// shownEvent reports whether a task's latest custom event ev is shown
// beside its progress reported: not when it is a progress event
// (EventTypeProgress) and the task reported progress, since ReportProgress
// emits its report as that very event, and one progress is shown, once.
func shownEvent(ev bgtask.LatestEvent, reported *bgtype.Progress) bool {
	return ev.Count > 0 && !(ev.EventType == bgtype.EventTypeProgress && reported != nil)
}

// messages returns the history of the owner's task id (Owner.Messages),
// empty when it has none or cannot be read.
func (o owner) messages(ctx context.Context, id string) []bgtask.MessageRecord {
	msgs, err := o.Messages(ctx, id)
	if err != nil || msgs == nil {
		return []bgtask.MessageRecord{}
	}
	return msgs
}
