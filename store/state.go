// The state of a task as it is kept: its status, its metadata record and
// the one reducer (Apply) through which every store changes records.

package store

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/internal/reduce"
)

// StateKey names a piece of agent state and the pure function that updates
// it, like a state key in an agent framework's checkpoint. Apply must not
// fail, block or keep references to its arguments: invalid or conflicting
// updates are dropped, not reported.
type StateKey[V, A any] struct {
	Key   string
	Apply func(v *V, a A)
}

// TaskStateKey is the state key under which task metadata is kept. A host that
// already checkpoints its agent's state can keep a Snapshot under
// TaskStateKey.Key and reduce it with TaskStateKey.Apply; every Store applies the
// same function, so the lifecycle invariants hold everywhere.
var TaskStateKey = StateKey[Snapshot, Action]{Key: "background_task_state", Apply: Apply}

// Snapshot is the metadata of an owner's tasks, keyed by task id. The zero
// value is an empty snapshot ready to use.
type Snapshot struct {
	Tasks map[string]bgtype.TaskMeta `json:"tasks"`
}

// UnmarshalJSON decodes a snapshot and rejects corrupt records with an error
// that names the task. A record without an id takes its key.
func (s *Snapshot) UnmarshalJSON(b []byte) error {
	var raw struct {
		Tasks map[string]json.RawMessage `json:"tasks"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return fmt.Errorf("%w: snapshot: %v", bgtype.ErrCorrupt, err)
	}
	tasks := make(map[string]bgtype.TaskMeta, len(raw.Tasks))
	for id, rec := range raw.Tasks {
		m := bgtype.TaskMeta{ID: id}
		if err := m.UnmarshalJSON(rec); err != nil {
			return err
		}
		if m.ID != id {
			return fmt.Errorf("%w: task %s stored under key %q", bgtype.ErrCorrupt, m.ID, id)
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
// value has no op: Apply ignores it and ValidateCommit refuses it.
//
// At is the time of the commit that carries the action, for the stamps a
// record lacks (see [Apply]): the reducer reads no clock, so whoever
// builds the action sets it (the Manager stamps its records itself). Zero
// stamps nothing.
type Action struct {
	Op    ActionOp          `json:"op"`
	Tasks []bgtype.TaskMeta `json:"tasks,omitempty"`
	IDs   []string          `json:"ids,omitempty"`
	At    time.Time         `json:"at,omitzero"`
}

// UnmarshalJSON decodes an action, rejecting a record no code could handle
// with an error matching ErrCorrupt that names the task; an upsert's record
// may have no status (a content-only update).
func (a *Action) UnmarshalJSON(b []byte) error {
	type plainMeta bgtype.TaskMeta // drops TaskMeta's decoder, which requires a status
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
		return fmt.Errorf("%w: action: %v", bgtype.ErrCorrupt, err)
	}
	var tasks []bgtype.TaskMeta
	for i := range raw.Tasks {
		m := bgtype.TaskMeta(raw.Tasks[i].plainMeta)
		m.Status = bgtype.Status(raw.Tasks[i].Status)
		if err := check(&m, raw.Op == OpUpsert); err != nil {
			return err
		}
		tasks = append(tasks, m)
	}
	*a = Action{Op: raw.Op, Tasks: tasks, IDs: raw.IDs, At: raw.At}
	return nil
}

// Upsert inserts m, or updates the record with the same id under the
// invariants of Apply. An update may leave m.Status empty to keep the
// record's status and change only its content; an insert without a status
// is dropped.
func UpsertAction(m bgtype.TaskMeta) Action { return Action{Op: OpUpsert, Tasks: []bgtype.TaskMeta{m}} }

// ReplaceAll makes the snapshot hold exactly tasks. A task that is also
// present already is merged under the invariants of Apply, so a
// terminal record stays as it is.
func ReplaceAllAction(tasks ...bgtype.TaskMeta) Action { return Action{Op: OpReplaceAll, Tasks: tasks} }

// Remove forgets the terminal tasks among ids. Non-terminal tasks are kept:
// a live task is never forgotten.
func RemoveAction(ids ...string) Action { return Action{Op: OpRemove, IDs: ids} }

// Announce marks the terminal tasks among ids as announced: the owner's
// loop has taken their terminal event, so a restart does not announce them
// again. Ids of tasks that are not terminal, unknown, or another owner's
// are dropped, not errors. The mark is never cleared.
func AnnounceAction(ids ...string) Action { return Action{Op: OpAnnounce, IDs: ids} }

// ValidateCommit reports why a Store must refuse Commit(ctx, owner,
// actions...): bgtype.ErrInvalidOwner for a blank owner, or an error matching
// ErrInvalidAction (and ErrCorrupt, for a record no code could handle) that
// names the task. Every Store calls it before it applies anything, so all
// of them refuse the same input with the same error.
func ValidateCommit(owner string, actions ...Action) error {
	if !bgtype.ValidOwner(owner) {
		return bgtype.ErrInvalidOwner
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
		if err := check(t, a.Op == OpUpsert); err != nil {
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

// check validates a record of an action: an upsert may leave the status empty.
//
//go:noinline
func check(m *bgtype.TaskMeta, upsert bool) error {
	if upsert {
		return m.ValidateUpdate()
	}
	return m.Validate()
}

func wrapInvalid(err error) error { return fmt.Errorf("%w: %w", ErrInvalidAction, err) }

//go:noinline
func otherOwner(t *bgtype.TaskMeta, owner string) error {
	return fmt.Errorf("%w: task %s belongs to owner %q, not %q", ErrInvalidAction, t.ID, t.Owner, owner)
}

// Apply is the task state reducer, the one place where the lifecycle
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
//	OutputBytes        the update's              the update's if set   the update's if the record has none
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
// that is not JSON) are dropped. Apply never panics, blocks or keeps a
// reference to a; it is not safe for concurrent use on one snapshot.
func Apply(s *Snapshot, a Action) {
	switch a.Op {
	case OpUpsert:
		if s.Tasks == nil {
			s.Tasks = make(map[string]bgtype.TaskMeta)
		}
		for i := range a.Tasks {
			upsertInto(s.Tasks, &a.Tasks[i], a.At, true)
		}
	case OpReplaceAll:
		next := make(map[string]bgtype.TaskMeta, len(a.Tasks))
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
func upsertInto(tasks map[string]bgtype.TaskMeta, u *bgtype.TaskMeta, at time.Time, noStatus bool) {
	if check(u, noStatus) != nil {
		return
	}
	cur, ok := tasks[u.ID]
	if !ok {
		if u.Status == "" {
			return // nothing to enrich
		}
		m := u.Clone()
		reduce.SettleNew(&m, at)
		tasks[u.ID] = m
		return
	}
	if reduce.MergeUpsert(&cur, u, at) {
		tasks[u.ID] = cur
	}
}
