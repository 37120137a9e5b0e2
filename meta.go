package bgtask

import (
	"encoding/json"
	"fmt"
	"time"
)

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
// Identity fields (ID, Owner, Type, Name, Parent, CreatedAt) are set once at
// spawn. Status, Error, Result and the stamps change through [ApplyAction]
// only, which keeps the lifecycle invariants.
type TaskMeta struct {
	ID          string          `json:"task_id"`
	Owner       string          `json:"owner"`
	Type        string          `json:"task_type,omitempty"`
	Name        string          `json:"name,omitempty"`
	Description string          `json:"description,omitempty"`
	Status      TaskStatus      `json:"status"`
	Error       string          `json:"error,omitempty"`
	Stack       string          `json:"stack,omitempty"` // set when the function panicked
	Result      json.RawMessage `json:"result,omitempty"`
	CreatedAt   time.Time       `json:"created_at,omitzero"`
	StartedAt   time.Time       `json:"started_at,omitzero"`
	FinishedAt  time.Time       `json:"finished_at,omitzero"`
	Parent      Parent          `json:"parent,omitzero"`
	Detached    bool            `json:"detached,omitempty"`
	Instance    string          `json:"instance,omitempty"`      // runtime instance that ran it
	Attempt     int64           `json:"attempt,omitempty"`       // fence: writes on an older attempt are dropped
	Wake        WakePolicy      `json:"wake,omitempty"`          // what reaches the owner's inbox; "" is WakeOnTerminal
	Input       *InputRequest   `json:"input_request,omitempty"` // set while awaiting_input
}

// InputRequest is a question a task asked its owner (Task.RequestInput). The
// owner answers with a Message whose InReplyTo is ID.
type InputRequest struct {
	ID     string `json:"id"`
	Prompt string `json:"prompt"`
}

// validate reports why m cannot be stored, naming the task. It runs on every
// commit, on the task's goroutine, so the error is built out of line.
func (m *TaskMeta) validate() error {
	if m.ID == "" || m.Owner == "" || !m.Status.Valid() || m.Attempt < 0 || (m.Result != nil && !json.Valid(m.Result)) || !m.Wake.Valid() {
		return m.invalid()
	}
	return nil
}

//go:noinline
func (m *TaskMeta) invalid() error {
	switch {
	case m.ID == "":
		return fmt.Errorf("%w: task without id", ErrCorrupt)
	case m.Owner == "":
		return fmt.Errorf("%w: task %s: empty owner", ErrCorrupt, m.ID)
	case !m.Status.Valid():
		return fmt.Errorf("%w: task %s: unknown status %q", ErrCorrupt, m.ID, m.Status)
	case m.Attempt < 0:
		return fmt.Errorf("%w: task %s: negative attempt %d", ErrCorrupt, m.ID, m.Attempt)
	case !m.Wake.Valid():
		return fmt.Errorf("%w: task %s: unknown wake policy %q", ErrCorrupt, m.ID, m.Wake)
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
	if err := (*TaskMeta)(&p).validate(); err != nil {
		return err
	}
	*m = TaskMeta(p)
	return nil
}
