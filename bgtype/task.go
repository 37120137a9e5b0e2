package bgtype

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// Status is where a task is in its life. The zero value is not a valid
// status. Statuses only move forward:
//
//	queued ──► running ◄──► awaiting_input
//	   │          │               │
//	   │          └───────────────┴──► completed | failed | cancelled | interrupted
//	   └──────────────────────────────► cancelled | interrupted
//
// Terminal statuses are final: the reducer drops any later update that asks
// for another status, and lets one with the same status or none only fill
// what the record lacks (see [store.Apply]).
type Status string

const (
	// StatusQueued: spawned while a concurrency limit was full and the Manager
	// queues (Limits.QueueWhenFull). The task function has not started. The
	// Manager moves it to running when a slot frees, or to cancelled when it
	// is cancelled first.
	StatusQueued Status = "queued"
	// StatusRunning: the task function is running. It leaves this status
	// when the function returns (completed, failed or cancelled), or when
	// another runtime instance finds its process gone (interrupted).
	StatusRunning Status = "running"
	// StatusAwaitingInput: the running function asked its owner for input
	// (Task.RequestInput) and waits for the answer; the record's Input holds
	// the request (an update that carries a request implies this status). The answer (a Message whose InReplyTo is the request id)
	// moves it back to running. It ends like a running task.
	StatusAwaitingInput Status = "awaiting_input"
	// StatusCompleted (terminal): the function returned a nil error. The
	// record's Result holds the JSON of the returned value.
	StatusCompleted Status = "completed"
	// StatusFailed (terminal): the function returned an error that is not a
	// cancellation, or panicked. The record's Error holds the text.
	StatusFailed Status = "failed"
	// StatusCanceled (terminal): the task was cancelled and its function
	// returned an error matching context.Canceled or the cancel cause, or it
	// was cancelled while queued.
	StatusCanceled Status = "cancelled"
	// StatusInterrupted (terminal): the runtime instance that ran the task is
	// gone, so the function will never report. Set at restore or by a reaper;
	// closures are never re-run.
	StatusInterrupted Status = "interrupted"
)

// Statuses returns every status in lifecycle order.
func Statuses() []Status {
	return []Status{StatusQueued, StatusRunning, StatusAwaitingInput, StatusCompleted, StatusFailed, StatusCanceled, StatusInterrupted}
}

// String returns the lowercase name.
func (s Status) String() string { return string(s) }

// IsTerminal reports whether s is completed, failed, cancelled or interrupted.
func (s Status) IsTerminal() bool {
	switch s {
	case StatusCompleted, StatusFailed, StatusCanceled, StatusInterrupted:
		return true
	}
	return false
}

// Valid reports whether s is one of the statuses this package defines.
func (s Status) Valid() bool { return s.Rank() >= 0 }

// rank orders statuses so the reducer can refuse moves backwards.
// Rank is s's place in the lifecycle, for the reducer's "statuses only
// move forward" rule: queued 0, running and awaiting input 1, terminal 2;
// -1 for an unknown status.
func (s Status) Rank() int {
	switch s {
	case StatusQueued:
		return 0
	case StatusRunning, StatusAwaitingInput:
		return 1
	case StatusCompleted, StatusFailed, StatusCanceled, StatusInterrupted:
		return 2
	}
	return -1
}

// UnmarshalJSON accepts only known statuses, so a corrupt stored row is an
// error rather than a task in a state nothing handles.
func (s *Status) UnmarshalJSON(b []byte) error {
	var str string
	if err := json.Unmarshal(b, &str); err != nil {
		return statusError{fmt.Sprintf("status: %v", err)}
	}
	if !Status(str).Valid() {
		return statusError{fmt.Sprintf("unknown status %q", str)}
	}
	*s = Status(str)
	return nil
}

// statusError is a status that cannot be decoded. It matches ErrCorrupt
// without repeating its text, since callers add the task it belongs to.
type statusError struct{ msg string }

func (e statusError) Error() string        { return e.msg }
func (e statusError) Is(target error) bool { return target == ErrCorrupt }

// Parent is a task's lineage: what it was spawned from. Every field is
// optional. TaskID is the task that spawned it (a nested spawn), RunID the
// agent run, CallID the tool call and AgentID the agent. Spawn fills the
// fields left empty from the context (see WithToolCall and TaskFromContext).
type Parent struct {
	TaskID  string `json:"task_id,omitempty"`
	RunID   string `json:"run_id,omitempty"`
	CallID  string `json:"call_id,omitempty"`
	AgentID string `json:"agent_id,omitempty"`
}

// IsZero reports whether no lineage field is set.
func (p Parent) IsZero() bool { return p == Parent{} }

// TaskMeta is the persisted record of a task: metadata only. The function,
// its goroutine and its inbox are never persisted, and a restored task is
// never re-run. The zero value is not a valid record (it has no ID).
//
// Identity fields (ID, Owner, Type, Name, Parent, Tags, IdempotencyKey,
// CreatedAt) are set once at spawn. Status, Error, Result and the stamps change through [store.Apply]
// only, which keeps the lifecycle invariants.
type TaskMeta struct {
	ID           string          `json:"task_id"`
	Owner        string          `json:"owner"`
	Type         string          `json:"task_type,omitempty"`
	Name         string          `json:"name,omitempty"`
	Description  string          `json:"description,omitempty"`
	Status       Status          `json:"status"`
	Error        string          `json:"error,omitempty"`
	ErrorKind    ErrorKind       `json:"error_kind,omitempty"`    // why a failed or interrupted task ended
	CancelReason string          `json:"cancel_reason,omitempty"` // why a cancelled task was cancelled (WithReason)
	Stack        string          `json:"stack,omitempty"`         // set when the function panicked
	Result       json.RawMessage `json:"result,omitempty"`
	CreatedAt    time.Time       `json:"created_at,omitzero"`
	StartedAt    time.Time       `json:"started_at,omitzero"`
	FinishedAt   time.Time       `json:"finished_at,omitzero"`
	Parent       Parent          `json:"parent,omitzero"`
	Detached     bool            `json:"detached,omitempty"`
	Instance     string          `json:"instance,omitempty"`      // runtime instance that ran it
	Attempt      int64           `json:"attempt,omitempty"`       // fence: writes on an older attempt are dropped
	Wake         WakePolicy      `json:"wake,omitempty"`          // what reaches the owner's inbox; "" is WakeOnTerminal
	Input        *InputRequest   `json:"input_request,omitempty"` // set while awaiting_input: the oldest open request
	Tags         []string        `json:"tags,omitempty"`          // set at spawn (WithTags), never changed
	// MoreInput are the task's other open input requests, oldest first,
	// when its goroutines ask at once (Input is the oldest); nil while
	// one or none is open. OpenInputs lists them all.
	MoreInput []InputRequest `json:"more_input_requests,omitempty"`
	// Progress and idempotency (Task.ReportProgress, WithIdempotencyKey).
	Progress       *Progress `json:"progress,omitempty"`        // the latest progress the task reported
	IdempotencyKey string    `json:"idempotency_key,omitempty"` // set at spawn, never changed
	// durable announcements: set by Announce on a terminal record, never cleared
	Announced bool `json:"announced,omitempty"` // the owner's loop took its terminal event
	// Resume is set on the record of a task spawned from a registered
	// kind (a resumable task), nil on a closure's.
	Resume *Resume `json:"resume,omitempty"`
	// OutputBytes is how many bytes the task wrote to its output
	// (bgtask.Task.Output) in all, set on its terminal record when it
	// ends: so the end's notice and get_task say it on every instance of
	// a fleet, not only on the one that ran the task and keeps the output.
	// 0 while it runs and for a task that wrote none; never negative.
	OutputBytes int64 `json:"output_bytes,omitempty"`
}

// OpenInputs returns the task's open input requests, oldest first: Input
// and MoreInput; none unless it awaits input.
func (m *TaskMeta) OpenInputs() []InputRequest {
	if m.Input == nil {
		return nil
	}
	return append([]InputRequest{*m.Input}, m.MoreInput...)
}

// InputRequest is a question a task asked its owner (Task.RequestInput). The
// owner answers with a Message whose InReplyTo is ID.
type InputRequest struct {
	ID     string `json:"id"`
	Prompt string `json:"prompt"`
}

// Validate reports why m cannot be stored, naming the task, in an error
// matching ErrCorrupt; nil when it can. It runs on every commit, so the
// error is built out of line.
func (m *TaskMeta) Validate() error { return m.check(false) }

// ValidateUpdate is Validate for an update: it also accepts an empty
// status (an upsert without one keeps the record's status).
func (m *TaskMeta) ValidateUpdate() error { return m.check(true) }

func (m *TaskMeta) check(noStatus bool) error {
	if m.ID == "" || m.Owner == "" || !m.Status.Valid() && !(noStatus && m.Status == "") || m.Attempt < 0 || (m.Result != nil && !json.Valid(m.Result)) || !m.Wake.Valid() || !m.Progress.Valid() || !m.Resume.Valid() || len(m.MoreInput) > 0 && m.Input == nil || m.OutputBytes < 0 {
		return m.invalid(noStatus)
	}
	return nil
}

//go:noinline
func (m *TaskMeta) invalid(noStatus bool) error {
	switch {
	case m.ID == "":
		return fmt.Errorf("%w: task without id", ErrCorrupt)
	case m.Owner == "":
		return fmt.Errorf("%w: task %s: empty owner", ErrCorrupt, m.ID)
	case !m.Status.Valid() && !(noStatus && m.Status == ""):
		return fmt.Errorf("%w: task %s: unknown status %q", ErrCorrupt, m.ID, m.Status)
	case m.Attempt < 0:
		return fmt.Errorf("%w: task %s: negative attempt %d", ErrCorrupt, m.ID, m.Attempt)
	case !m.Wake.Valid():
		return fmt.Errorf("%w: task %s: unknown wake policy %q", ErrCorrupt, m.ID, m.Wake)
	case !m.Progress.Valid():
		return fmt.Errorf("%w: task %s: invalid progress %d/%d", ErrCorrupt, m.ID, m.Progress.Done, m.Progress.Total)
	case !m.Resume.Valid():
		return fmt.Errorf("%w: task %s: invalid resume (kind %q)", ErrCorrupt, m.ID, m.Resume.Kind)
	case len(m.MoreInput) > 0 && m.Input == nil:
		return fmt.Errorf("%w: task %s: more input requests without the first", ErrCorrupt, m.ID)
	case m.OutputBytes < 0:
		return fmt.Errorf("%w: task %s: negative output size %d", ErrCorrupt, m.ID, m.OutputBytes)
	}
	return fmt.Errorf("%w: task %s: result is not valid JSON", ErrCorrupt, m.ID)
}

// UnmarshalJSON decodes a record, tolerating missing optional fields and
// rejecting one that no code could handle (no id, no owner, unknown status).
func (m *TaskMeta) UnmarshalJSON(b []byte) error {
	type plain TaskMeta // drops the method set, so no recursion
	p := plain(*m)      // like encoding/json, keep what the input does not set (a snapshot pre-fills the id)
	if err := json.Unmarshal(b, &p); err != nil {
		id := m.ID
		if id == "" {
			var probe struct {
				ID string `json:"task_id"`
			}
			_ = json.Unmarshal(b, &probe)
			id = probe.ID
		}
		if id != "" {
			return fmt.Errorf("%w: task %s: %v", ErrCorrupt, id, err)
		}
		return fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	if err := (*TaskMeta)(&p).Validate(); err != nil {
		return err
	}
	*m = TaskMeta(p)
	return nil
}

// Clone returns a copy of m that shares no bytes with it (result, tags,
// input request and progress are copied).
func (m TaskMeta) Clone() TaskMeta {
	m.Result = cloneRaw(m.Result)
	m.Tags = slices.Clone(m.Tags)
	if m.Input != nil {
		in := *m.Input
		m.Input = &in
	}
	m.MoreInput = slices.Clone(m.MoreInput)
	if m.Progress != nil {
		p := *m.Progress
		m.Progress = &p
	}
	m.Resume = m.Resume.Clone()
	return m
}

func cloneRaw(r json.RawMessage) json.RawMessage {
	if r == nil {
		return nil
	}
	return append(json.RawMessage(nil), r...)
}
