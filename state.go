// The state of a task as it is kept: its status, its metadata record and
// the one reducer (ApplyAction) through which every store changes records.

package bgtask

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// TaskStatus is where a task is in its life. The zero value is not a valid
// status. Statuses only move forward:
//
//	queued ──► running ◄──► awaiting_input
//	   │          │               │
//	   │          └───────────────┴──► completed | failed | cancelled | interrupted
//	   └──────────────────────────────► cancelled | interrupted
//
// Terminal statuses are final: the reducer drops any later update that asks
// for another status, and lets one with the same status or none only fill
// what the record lacks (see [ApplyAction]).
type TaskStatus string

const (
	// StatusQueued: spawned while a concurrency limit was full and the Manager
	// queues (WithQueueWhenFull). The task function has not started. The
	// Manager moves it to running when a slot frees, or to cancelled when it
	// is cancelled first.
	StatusQueued TaskStatus = "queued"
	// StatusRunning: the task function is running. It leaves this status
	// when the function returns (completed, failed or cancelled), or when
	// another runtime instance finds its process gone (interrupted).
	StatusRunning TaskStatus = "running"
	// StatusAwaitingInput: the running function asked its owner for input
	// (Task.RequestInput) and waits for the answer; the record's Input holds
	// the request (an update that carries a request implies this status). The answer (a Message whose InReplyTo is the request id)
	// moves it back to running. It ends like a running task.
	StatusAwaitingInput TaskStatus = "awaiting_input"
	// StatusCompleted (terminal): the function returned a nil error. The
	// record's Result holds the JSON of the returned value.
	StatusCompleted TaskStatus = "completed"
	// StatusFailed (terminal): the function returned an error that is not a
	// cancellation, or panicked. The record's Error holds the text.
	StatusFailed TaskStatus = "failed"
	// StatusCancelled (terminal): the task was cancelled and its function
	// returned an error matching context.Canceled or the cancel cause, or it
	// was cancelled while queued.
	StatusCancelled TaskStatus = "cancelled"
	// StatusInterrupted (terminal): the runtime instance that ran the task is
	// gone, so the function will never report. Set at restore or by a reaper;
	// closures are never re-run.
	StatusInterrupted TaskStatus = "interrupted"
)

// Statuses returns every status in lifecycle order.
func Statuses() []TaskStatus {
	return []TaskStatus{StatusQueued, StatusRunning, StatusAwaitingInput, StatusCompleted, StatusFailed, StatusCancelled, StatusInterrupted}
}

// String returns the lowercase name.
func (s TaskStatus) String() string { return string(s) }

// IsTerminal reports whether s is completed, failed, cancelled or interrupted.
func (s TaskStatus) IsTerminal() bool {
	switch s {
	case StatusCompleted, StatusFailed, StatusCancelled, StatusInterrupted:
		return true
	}
	return false
}

// Valid reports whether s is one of the statuses this package defines.
func (s TaskStatus) Valid() bool { return s.rank() >= 0 }

// rank orders statuses so the reducer can refuse moves backwards.
func (s TaskStatus) rank() int {
	switch s {
	case StatusQueued:
		return 0
	case StatusRunning, StatusAwaitingInput:
		return 1
	case StatusCompleted, StatusFailed, StatusCancelled, StatusInterrupted:
		return 2
	}
	return -1
}

// UnmarshalJSON accepts only known statuses, so a corrupt stored row is an
// error rather than a task in a state nothing handles.
func (s *TaskStatus) UnmarshalJSON(b []byte) error {
	var str string
	if err := json.Unmarshal(b, &str); err != nil {
		return statusError{fmt.Sprintf("status: %v", err)}
	}
	if !TaskStatus(str).Valid() {
		return statusError{fmt.Sprintf("unknown status %q", str)}
	}
	*s = TaskStatus(str)
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
// CreatedAt) are set once at spawn. Status, Error, Result and the stamps change through [ApplyAction]
// only, which keeps the lifecycle invariants.
type TaskMeta struct {
	ID           string          `json:"task_id"`
	Owner        string          `json:"owner"`
	Type         string          `json:"task_type,omitempty"`
	Name         string          `json:"name,omitempty"`
	Description  string          `json:"description,omitempty"`
	Status       TaskStatus      `json:"status"`
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
	Input        *InputRequest   `json:"input_request,omitempty"` // set while awaiting_input
	Tags         []string        `json:"tags,omitempty"`          // set at spawn (WithTags), never changed
	// Progress and idempotency (Task.ReportProgress, WithIdempotencyKey).
	Progress       *TaskProgress `json:"progress,omitempty"`        // the latest progress the task reported
	IdempotencyKey string        `json:"idempotency_key,omitempty"` // set at spawn, never changed
	// durable announcements: set by Announce on a terminal record, never cleared
	Announced bool `json:"announced,omitempty"` // the owner's loop took its terminal event
}

// InputRequest is a question a task asked its owner (Task.RequestInput). The
// owner answers with a Message whose InReplyTo is ID.
type InputRequest struct {
	ID     string `json:"id"`
	Prompt string `json:"prompt"`
}

// validate reports why m cannot be stored, naming the task. It runs on every
// commit, so the error is built out of line (docs/internals.md).
func (m *TaskMeta) validate() error { return m.check(false) }

// check is validate, except that noStatus also accepts an empty status: an
// Upsert without one updates a record and keeps its status.
func (m *TaskMeta) check(noStatus bool) error {
	if m.ID == "" || m.Owner == "" || !m.Status.Valid() && !(noStatus && m.Status == "") || m.Attempt < 0 || (m.Result != nil && !json.Valid(m.Result)) || !m.Wake.Valid() || !m.Progress.valid() {
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
	case !m.Progress.valid():
		return fmt.Errorf("%w: task %s: invalid progress %d/%d", ErrCorrupt, m.ID, m.Progress.Done, m.Progress.Total)
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

// StateKey names a piece of agent state and the pure function that updates
// it, like a state key in an agent framework's checkpoint. Apply must not
// fail, block or keep references to its arguments: invalid or conflicting
// updates are dropped, not reported.
type StateKey[V, A any] struct {
	Key   string
	Apply func(v *V, a A)
}

// TaskState is the state key under which task metadata is kept. A host that
// already checkpoints its agent's state can keep a Snapshot under
// TaskState.Key and reduce it with TaskState.Apply; every Store applies the
// same function, so the lifecycle invariants hold everywhere.
var TaskState = StateKey[Snapshot, Action]{Key: "background_task_state", Apply: ApplyAction}

// Snapshot is the metadata of an owner's tasks, keyed by task id. The zero
// value is an empty snapshot ready to use.
type Snapshot struct {
	Tasks map[string]TaskMeta `json:"tasks"`
}

// UnmarshalJSON decodes a snapshot and rejects corrupt records with an error
// that names the task. A record without an id takes its key.
func (s *Snapshot) UnmarshalJSON(b []byte) error {
	var raw struct {
		Tasks map[string]json.RawMessage `json:"tasks"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return fmt.Errorf("%w: snapshot: %v", ErrCorrupt, err)
	}
	tasks := make(map[string]TaskMeta, len(raw.Tasks))
	for id, rec := range raw.Tasks {
		m := TaskMeta{ID: id}
		if err := m.UnmarshalJSON(rec); err != nil {
			return err
		}
		if m.ID != id {
			return fmt.Errorf("%w: task %s stored under key %q", ErrCorrupt, m.ID, id)
		}
		tasks[id] = m
	}
	s.Tasks = tasks
	return nil
}

// ActionOp says what an Action does.
type ActionOp string

// The actions of the task state reducer.
const (
	OpUpsert     ActionOp = "upsert"      // insert or update one task
	OpReplaceAll ActionOp = "replace_all" // make the snapshot hold exactly these tasks
	OpRemove     ActionOp = "remove"      // forget terminal tasks (retention)
	OpAnnounce   ActionOp = "announce"    // mark terminal tasks as announced to their owner
)

// Action is one update of a Snapshot. Build it with Upsert, ReplaceAll or
// Remove. It marshals to JSON so a host can log or replay it. The zero
// value has no op: ApplyAction ignores it and ValidateCommit refuses it.
//
// At is the time of the commit that carries the action, for the stamps a
// record lacks (see [ApplyAction]): the reducer reads no clock, so whoever
// builds the action sets it (the Manager stamps its records itself). Zero
// stamps nothing.
type Action struct {
	Op    ActionOp   `json:"op"`
	Tasks []TaskMeta `json:"tasks,omitempty"`
	IDs   []string   `json:"ids,omitempty"`
	At    time.Time  `json:"at,omitzero"`
}

// UnmarshalJSON decodes an action, rejecting a record no code could handle
// with an error matching ErrCorrupt that names the task; an upsert's record
// may have no status (a content-only update).
func (a *Action) UnmarshalJSON(b []byte) error {
	type plainMeta TaskMeta // drops TaskMeta's decoder, which requires a status
	type record struct {
		plainMeta
		Status string `json:"status"` // checked below: may be empty in an upsert
	}
	var raw struct {
		Op    ActionOp  `json:"op"`
		Tasks []record  `json:"tasks"`
		IDs   []string  `json:"ids"`
		At    time.Time `json:"at"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return fmt.Errorf("%w: action: %v", ErrCorrupt, err)
	}
	var tasks []TaskMeta
	for i := range raw.Tasks {
		m := TaskMeta(raw.Tasks[i].plainMeta)
		m.Status = TaskStatus(raw.Tasks[i].Status)
		if err := m.check(raw.Op == OpUpsert); err != nil {
			return err
		}
		tasks = append(tasks, m)
	}
	*a = Action{Op: raw.Op, Tasks: tasks, IDs: raw.IDs, At: raw.At}
	return nil
}

// Upsert inserts m, or updates the record with the same id under the
// invariants of ApplyAction. An update may leave m.Status empty to keep the
// record's status and change only its content; an insert without a status
// is dropped.
func Upsert(m TaskMeta) Action { return Action{Op: OpUpsert, Tasks: []TaskMeta{m}} }

// ReplaceAll makes the snapshot hold exactly tasks. A task that is also
// present already is merged under the invariants of ApplyAction, so a
// terminal record stays as it is.
func ReplaceAll(tasks ...TaskMeta) Action { return Action{Op: OpReplaceAll, Tasks: tasks} }

// Remove forgets the terminal tasks among ids. Non-terminal tasks are kept:
// a live task is never forgotten.
func Remove(ids ...string) Action { return Action{Op: OpRemove, IDs: ids} }

// Announce marks the terminal tasks among ids as announced: the owner's
// loop has taken their terminal event, so a restart does not announce them
// again. Ids of tasks that are not terminal, unknown, or another owner's
// are dropped, not errors. The mark is never cleared.
func Announce(ids ...string) Action { return Action{Op: OpAnnounce, IDs: ids} }

// ValidateCommit reports why a Store must refuse Commit(ctx, owner,
// actions...): ErrInvalidOwner for a blank owner, or an error matching
// ErrInvalidAction (and ErrCorrupt, for a record no code could handle) that
// names the task. Every Store calls it before it applies anything, so all
// of them refuse the same input with the same error.
func ValidateCommit(owner string, actions ...Action) error {
	if !validOwner(owner) {
		return ErrInvalidOwner
	}
	for i := range actions {
		if err := actions[i].validate(owner); err != nil {
			return err
		}
	}
	return nil
}

// validate reports why a Store must refuse a, for the given owner.
func (a *Action) validate(owner string) error {
	if a.Op != OpUpsert && a.Op != OpReplaceAll && a.Op != OpRemove && a.Op != OpAnnounce || a.Op == OpUpsert && len(a.Tasks) != 1 {
		return a.invalid()
	}
	for i := range a.Tasks {
		t := &a.Tasks[i]
		if err := t.check(a.Op == OpUpsert); err != nil {
			return wrapInvalid(err)
		}
		if t.Owner != owner {
			return otherOwner(t, owner)
		}
	}
	return nil
}

//go:noinline
func (a *Action) invalid() error {
	if a.Op == OpUpsert {
		return fmt.Errorf("%w: upsert carries %d tasks, want 1", ErrInvalidAction, len(a.Tasks))
	}
	return fmt.Errorf("%w: unknown op %q", ErrInvalidAction, a.Op)
}

//go:noinline
func wrapInvalid(err error) error { return fmt.Errorf("%w: %w", ErrInvalidAction, err) }

//go:noinline
func otherOwner(t *TaskMeta, owner string) error {
	return fmt.Errorf("%w: task %s belongs to owner %q, not %q", ErrInvalidAction, t.ID, t.Owner, owner)
}

// ApplyAction is the task state reducer, the one place where the lifecycle
// invariants live. An Upsert of an id the snapshot does not hold inserts the
// record (one without a status is dropped: there is nothing to enrich). An
// Upsert of a held id is dropped whole when it is for another owner, when it
// is fenced on an older Attempt, or when it asks for an earlier status
// (running back to queued) or, on a terminal record, for another status.
// Otherwise it merges field by field:
//
//	field              live record, update       live record, update   terminal record, update
//	                   with a status             without a status      with its status or none
//	Status             the update's; an input    kept; an input        kept
//	                   request makes it          request makes it
//	                   awaiting_input            awaiting_input
//	Description        the update's              the update's if set   the update's if the record has none
//	Error and Stack    the update's              the update's if set   the update's if the record has neither
//	ErrorKind          the update's              the update's if set   the update's if the record has none
//	CancelReason       the update's              the update's if set   the update's if the record has none
//	Result             the update's              the update's if set   the update's if the record has none
//	Instance           the update's              the update's if set   the update's if the record has none
//	Attempt            the update's (never lower: a lower one is fenced)                 kept
//	Input              the update's request if it has one, else kept while awaiting_input; none otherwise
//	Progress           the update's if set and not older (by At) than the record's            the update's if the record has none
//	CreatedAt          kept once set; else the update's, else the action's At
//	StartedAt          kept once set; else the update's, else At once the status is past queued
//	FinishedAt         kept once set; else the update's, else At, but only once terminal
//	Owner, Type, Name, Parent, Detached, Wake, Tags, IdempotencyKey: set at insert, never changed
//	Owner, Type, Name, Parent, Detached, Wake, Tags: set at insert, never changed
//	Announced          set by Announce on a terminal record, or by an update
//	                   that carries it and leaves the record terminal; never
//	                   cleared; a live record never has it
//
// So a terminal record is final: nothing that is set in it ever changes
// (what its owner was told stays true), yet a same-status re-mirror or a
// content-only update still fills what it lacks. The Attempt in an
// update is absolute: a reaper that supersedes an executor writes the next
// attempt with its terminal status, and when that write is dropped (the task
// ended first) the attempt does not move either.
//
// The reducer has no clock: At is the commit's time, set by whoever builds
// the action; a zero At stamps nothing, so replaying the same actions gives
// the same snapshot. An insert follows the same rules as an update of an
// empty record (an input request on a live status makes it awaiting_input; a
// terminal record keeps no request).
//
// ReplaceAll merges the given records that are already present under the
// same rules; its records must carry a status. Remove forgets terminal
// records only. Announce sets Announced on the terminal records among its
// ids and ignores the others. Invalid records (no id, no owner, unknown status, a result
// that is not JSON) are dropped. ApplyAction never panics, blocks or keeps a
// reference to a; it is not safe for concurrent use on one snapshot.
func ApplyAction(s *Snapshot, a Action) {
	switch a.Op {
	case OpUpsert:
		if s.Tasks == nil {
			s.Tasks = make(map[string]TaskMeta)
		}
		for i := range a.Tasks {
			upsertInto(s.Tasks, &a.Tasks[i], a.At, true)
		}
	case OpReplaceAll:
		next := make(map[string]TaskMeta, len(a.Tasks))
		for i := range a.Tasks {
			u := &a.Tasks[i]
			if old, ok := s.Tasks[u.ID]; ok {
				if _, seen := next[u.ID]; !seen {
					next[u.ID] = old
				}
			}
			upsertInto(next, u, a.At, false)
		}
		s.Tasks = next
	case OpRemove:
		for _, id := range a.IDs {
			if m, ok := s.Tasks[id]; ok && m.Status.IsTerminal() {
				delete(s.Tasks, id)
			}
		}
	case OpAnnounce:
		for _, id := range a.IDs {
			if m, ok := s.Tasks[id]; ok && m.Status.IsTerminal() && !m.Announced {
				m.Announced = true
				s.Tasks[id] = m
			}
		}
	}
}

// upsertInto applies one upsert to a snapshot's map. noStatus allows an
// update without a status (Upsert's, not ReplaceAll's).
func upsertInto(tasks map[string]TaskMeta, u *TaskMeta, at time.Time, noStatus bool) {
	if u.check(noStatus) != nil {
		return
	}
	cur, ok := tasks[u.ID]
	if !ok {
		if u.Status == "" {
			return // nothing to enrich
		}
		m := cloneMeta(*u)
		settleNew(&m, at)
		tasks[u.ID] = m
		return
	}
	if mergeUpsert(&cur, u, at) {
		tasks[u.ID] = cur
	}
}

// settleNew makes a record new to a store follow the rules of ApplyAction:
// an input request only while awaiting_input, and the stamps its status
// calls for taken from at when it has none.
func settleNew(m *TaskMeta, at time.Time) {
	switch {
	case m.Input == nil:
	case m.Status.IsTerminal():
		m.Input = nil
	default:
		m.Status = StatusAwaitingInput
	}
	m.Announced = m.Announced && m.Status.IsTerminal()
	stamp(m, m, at)
}

// mergeUpsert applies a valid update u to the stored record cur, in place,
// and reports whether it did; a dropped update leaves cur as it was. The
// rules are the table of ApplyAction. Records travel by pointer: they are
// large, and this runs on every task's goroutine, whose stack starts small.
func mergeUpsert(cur, u *TaskMeta, at time.Time) bool {
	if u.Owner != cur.Owner || u.Attempt < cur.Attempt ||
		u.Status != "" && u.Status.rank() < cur.Status.rank() {
		return false
	}
	if cur.Status.IsTerminal() {
		if u.Status != "" && u.Status != cur.Status {
			return false // lost a race against the end: its content must not land
		}
		enrich(cur, u)
		stamp(cur, u, at)
		return true
	}
	// Identity fields (Owner, Type, Name, Parent, Detached, Wake, Tags, IdempotencyKey) are not
	// copied: they are set once, at insert. Assigning field by field keeps
	// this frame small; it runs on every task's goroutine.
	next := u.Status
	if u.Status == "" {
		next = cur.Status
		setIf(&cur.Description, u.Description)
		setIf(&cur.Error, u.Error)
		setIf(&cur.Stack, u.Stack)
		setIf((*string)(&cur.ErrorKind), string(u.ErrorKind))
		setIf(&cur.CancelReason, u.CancelReason)
		setIf(&cur.Instance, u.Instance)
		if u.Result != nil {
			cur.Result = cloneRaw(u.Result)
		}
	} else {
		cur.Description, cur.Error, cur.Stack, cur.ErrorKind = u.Description, u.Error, u.Stack, u.ErrorKind
		cur.CancelReason = u.CancelReason
		cur.Result = cloneRaw(u.Result)
		cur.Instance = u.Instance
	}
	if u.Input != nil && !next.IsTerminal() {
		next = StatusAwaitingInput // asking for input is waiting for it
	}
	if u.Announced && next.IsTerminal() {
		cur.Announced = true // ended and announced at once (an answer given in the foreground)
	}
	mergeProgress(cur, u)
	cur.Status, cur.Attempt = next, u.Attempt
	switch {
	case next != StatusAwaitingInput:
		cur.Input = nil // leaving awaiting_input clears the request
	case u.Input != nil:
		in := *u.Input
		cur.Input = &in
	}
	stamp(cur, u, at)
	return true
}

// enrich fills a terminal record cur from a same-status or status-less
// update u: only what the record lacks is filled.
func enrich(cur, u *TaskMeta) {
	if cur.Description == "" {
		cur.Description = u.Description
	}
	if cur.Error == "" && cur.Stack == "" {
		cur.Error, cur.Stack = u.Error, u.Stack
	}
	if cur.ErrorKind == "" {
		cur.ErrorKind = u.ErrorKind
	}
	if cur.CancelReason == "" {
		cur.CancelReason = u.CancelReason
	}
	if cur.Result == nil {
		cur.Result = cloneRaw(u.Result)
	}
	if cur.Instance == "" {
		cur.Instance = u.Instance
	}
	if cur.Progress == nil && u.Progress != nil {
		p := *u.Progress
		cur.Progress = &p
	}
	cur.Announced = cur.Announced || u.Announced
}

// mergeProgress takes u's progress into the live record cur unless u has
// none or it is older than cur's: progress never goes back in time.
func mergeProgress(cur, u *TaskMeta) {
	if u.Progress == nil || cur.Progress != nil && u.Progress.At.Before(cur.Progress.At) {
		return
	}
	p := *u.Progress
	cur.Progress = &p
}

// stamp fills the times cur lacks from u, else from at where cur's status
// calls for them. A time once set is never changed.
func stamp(cur, u *TaskMeta, at time.Time) {
	fill(&cur.CreatedAt, u.CreatedAt, at)
	switch {
	case !cur.StartedAt.IsZero():
	case cur.Status == StatusQueued:
		cur.StartedAt = u.StartedAt
	default:
		fill(&cur.StartedAt, u.StartedAt, at)
	}
	if cur.Status.IsTerminal() {
		fill(&cur.FinishedAt, u.FinishedAt, at)
	}
}

// fill sets a zero *t to the first non-zero of from and at.
func fill(t *time.Time, from, at time.Time) {
	switch {
	case !t.IsZero():
	case !from.IsZero():
		*t = from
	default:
		*t = at
	}
}

// setIf sets *dst to v when v is not empty.
func setIf(dst *string, v string) {
	if v != "" {
		*dst = v
	}
}

// cloneMeta copies m so the stored record shares no bytes with the caller.
func cloneMeta(m TaskMeta) TaskMeta {
	m.Result = cloneRaw(m.Result)
	m.Tags = slices.Clone(m.Tags)
	if m.Input != nil {
		in := *m.Input
		m.Input = &in
	}
	if m.Progress != nil {
		p := *m.Progress
		m.Progress = &p
	}
	return m
}

func cloneRaw(r json.RawMessage) json.RawMessage {
	if r == nil {
		return nil
	}
	return append(json.RawMessage(nil), r...)
}
