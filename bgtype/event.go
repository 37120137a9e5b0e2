package bgtype

import (
	"encoding/json"
	"fmt"
)

// EventKind says what an Event reports.
type EventKind string

// The kinds of Event. Terminal kinds are never coalesced or dropped.
const (
	// EventCompleted: the task completed; Result holds its JSON result.
	EventCompleted EventKind = "completed"
	// EventFailed: the task failed or panicked; Error holds the text.
	EventFailed EventKind = "failed"
	// EventCanceled: the task ended cancelled.
	EventCanceled EventKind = "cancelled"
	// EventInterrupted: the runtime that ran the task is gone; Error says why.
	EventInterrupted EventKind = "interrupted"
	// EventCustom: emitted by the task with Task.Emit, or a message sent to a
	// sub-agent (EventType "agent_message").
	EventCustom EventKind = "custom"
	// EventCommitFailed: the task ended with Status but its terminal record
	// could not be committed to the Store; Error holds the store's error.
	// The terminal event follows it.
	EventCommitFailed EventKind = "commit_failed"
	// EventInputRequested: the task asked its owner for input
	// (Task.RequestInput); Input holds the request to answer.
	EventInputRequested EventKind = "input_requested"
)

// EventTypeMessage is the EventType of a message sent to a sub-agent.
const EventTypeMessage = "agent_message"

// IsTerminal reports whether k ends a task.
func (k EventKind) IsTerminal() bool {
	switch k {
	case EventCompleted, EventFailed, EventCanceled, EventInterrupted:
		return true
	}
	return false
}

// Event is what a task reports to its owner's Inbox. Its JSON form is the
// one the model sees:
//
//	{"kind":"completed","task_id":"task_…","name":"indexer","result":…}
//	{"kind":"failed","task_id":"task_…","error":"…"}
//	{"kind":"cancelled","task_id":"task_…"}
//	{"kind":"interrupted","task_id":"task_…","error":"…"}
//	{"kind":"custom","task_id":"task_…","event_type":"progress","payload":…}
//	{"kind":"commit_failed","task_id":"task_…","status":"completed","error":"…"}
//	{"kind":"input_requested","task_id":"task_…","input_request":{"id":"input_…","prompt":"…"}}
//
// The name is left out when the task has none. Payload and Result are JSON,
// encoded when the event was made, so the task may change its values
// afterwards.
type Event struct {
	Kind      EventKind
	TaskID    string
	Name      string          // the task's name, "" if it has none
	Result    json.RawMessage // completed
	Error     string          // failed, interrupted, commit_failed
	ErrorKind ErrorKind       // failed, interrupted: why it ended (see TaskMeta.ErrorKind)
	// CancelReason is the reason a cancelled task was given (WithReason).
	CancelReason string
	Status       Status          // commit_failed: the status that was not committed
	EventType    string          // custom
	Payload      json.RawMessage // custom
	Input        *InputRequest   // input_requested
	// OutputBytes is how many bytes a task that ended wrote to its output
	// (bgtask.Task.Output), when the one who shows the event knows it: the
	// end's event carries its terminal record's (TaskMeta.OutputBytes), on
	// whichever instance it is made, and the agent package's Plugin fills
	// in the size this instance keeps when the event has none; 0 when none
	// or not known. The JSON form of an event with output says how to read
	// it.
	OutputBytes int64

	// Quiet marks a custom event that must not wake an idle owner: progress
	// under the default wake policy. It reaches the inbox and is delivered
	// with the next drain, but Inbox.Wait and Plugin.WaitEvent do not
	// return for it. The zero value, false, wakes. It is not part of the
	// JSON form.
	Quiet bool
}

type eventJSON struct {
	Kind      EventKind        `json:"kind"`
	TaskID    string           `json:"task_id"`
	Name      string           `json:"name,omitempty"`
	EventType string           `json:"event_type,omitempty"`
	Payload   *json.RawMessage `json:"payload,omitempty"`
	Result    *json.RawMessage `json:"result,omitempty"`
	Status    Status           `json:"status,omitempty"`
	Error     *string          `json:"error,omitempty"`
	ErrorKind ErrorKind        `json:"error_kind,omitempty"`
	Reason    string           `json:"reason,omitempty"`
	Input     *InputRequest    `json:"input_request,omitempty"`
	Output    int64            `json:"output_bytes,omitempty"`
	Hint      string           `json:"output_hint,omitempty"`
}

// outputHint is what the JSON form of an ended task's event with output
// says of it: it never carries the output itself.
const outputHint = "read the output with get_task, output_since 0 (or output_tail)"

var jsonNull = json.RawMessage("null")

// MarshalJSON writes the shape of the event's kind: only the fields
// that kind carries, with a null result or payload when none was given.
func (e Event) MarshalJSON() ([]byte, error) {
	j := eventJSON{Kind: e.Kind, TaskID: e.TaskID, Name: e.Name}
	orNull := func(r json.RawMessage) *json.RawMessage {
		if len(r) == 0 {
			return &jsonNull
		}
		return &r
	}
	switch e.Kind {
	case EventCompleted:
		j.Result = orNull(e.Result)
	case EventFailed, EventInterrupted:
		j.Error, j.ErrorKind = &e.Error, e.ErrorKind
	case EventCanceled:
		j.Reason = e.CancelReason
	case EventCustom:
		j.EventType = e.EventType
		j.Payload = orNull(e.Payload)
	case EventCommitFailed:
		j.Status = e.Status
		j.Error = &e.Error
	case EventInputRequested:
		if e.Input == nil {
			return nil, fmt.Errorf("%w: input_requested event without a request", ErrInvalidEvent)
		}
		j.Input = e.Input
	default:
		return nil, fmt.Errorf("%w: unknown kind %q", ErrInvalidEvent, e.Kind)
	}
	if e.OutputBytes > 0 && e.Kind.IsTerminal() {
		j.Output, j.Hint = e.OutputBytes, outputHint
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads an event in the form MarshalJSON writes. An unknown
// kind or a missing task id is an error.
func (e *Event) UnmarshalJSON(b []byte) error {
	var j eventJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidEvent, err)
	}
	switch j.Kind {
	case EventCompleted, EventFailed, EventCanceled, EventInterrupted, EventCustom, EventCommitFailed, EventInputRequested:
	default:
		return fmt.Errorf("%w: unknown kind %q", ErrInvalidEvent, j.Kind)
	}
	if j.TaskID == "" {
		return fmt.Errorf("%w: %s event without task_id", ErrInvalidEvent, j.Kind)
	}
	if j.Kind == EventCustom && j.EventType == "" {
		return fmt.Errorf("%w: custom event without event_type", ErrInvalidEvent)
	}
	if j.Kind == EventInputRequested && (j.Input == nil || j.Input.ID == "") {
		return fmt.Errorf("%w: input_requested event without a request id", ErrInvalidEvent)
	}
	*e = Event{Kind: j.Kind, TaskID: j.TaskID, Name: j.Name, EventType: j.EventType, Status: j.Status, Input: j.Input, ErrorKind: j.ErrorKind, CancelReason: j.Reason}
	if j.Kind.IsTerminal() {
		e.OutputBytes = j.Output
	}
	if j.Payload != nil {
		e.Payload = *j.Payload
	}
	if j.Result != nil {
		e.Result = *j.Result
	}
	if j.Error != nil {
		e.Error = *j.Error
	}
	return nil
}

// Message is the payload of a message sent to a sub-agent, by its owner or
// to its owner, or the answer to an input request.
type Message struct {
	From      string `json:"from"`
	Content   string `json:"content"`
	InReplyTo string `json:"in_reply_to,omitempty"` // the InputRequest.ID it answers
}

// Message decodes a custom event of type EventTypeMessage. ok is false for
// any other event.
func (e Event) Message() (msg Message, ok bool) {
	if e.Kind != EventCustom || e.EventType != EventTypeMessage {
		return Message{}, false
	}
	if json.Unmarshal(e.Payload, &msg) != nil {
		return Message{}, false
	}
	return msg, true
}
