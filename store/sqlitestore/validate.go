package sqlitestore

import (
	"encoding/json"
	"fmt"

	"github.com/bgtask/bgtask"
)

// validate reports why the actions cannot be committed for owner, with the
// same rules and sentinels as the MemoryStore: bgtask.ErrInvalidOwner for a
// blank owner; bgtask.ErrInvalidAction for an unknown op, an upsert without
// exactly one task, a task of another owner, and (also matching
// bgtask.ErrCorrupt) a record no code could handle. It runs in the caller's
// goroutine, before the action joins a batch, so a bad action fails only
// its own Commit.
func validate(owner string, actions []bgtask.Action) error {
	if !validOwner(owner) {
		return bgtask.ErrInvalidOwner
	}
	for i := range actions {
		a := &actions[i]
		switch {
		case a.Op != bgtask.OpUpsert && a.Op != bgtask.OpReplaceAll && a.Op != bgtask.OpRemove:
			return fmt.Errorf("%w: unknown op %q", bgtask.ErrInvalidAction, a.Op)
		case a.Op == bgtask.OpUpsert && len(a.Tasks) != 1:
			return fmt.Errorf("%w: upsert carries %d tasks, want 1", bgtask.ErrInvalidAction, len(a.Tasks))
		}
		for j := range a.Tasks {
			if err := validMeta(owner, &a.Tasks[j]); err != nil {
				return err
			}
		}
	}
	return nil
}

func validMeta(owner string, m *bgtask.TaskMeta) error {
	var why string
	switch {
	case m.ID == "":
		return fmt.Errorf("%w: %w: task without id", bgtask.ErrInvalidAction, bgtask.ErrCorrupt)
	case m.Owner == "":
		why = "empty owner"
	case !m.Status.Valid():
		why = fmt.Sprintf("unknown status %q", m.Status)
	case m.Attempt < 0:
		why = fmt.Sprintf("negative attempt %d", m.Attempt)
	case !m.Wake.Valid():
		why = fmt.Sprintf("unknown wake policy %q", m.Wake)
	case m.Result != nil && !json.Valid(m.Result):
		why = "result is not valid JSON"
	case m.Owner != owner:
		return fmt.Errorf("%w: task %s belongs to owner %q, not %q", bgtask.ErrInvalidAction, m.ID, m.Owner, owner)
	default:
		return nil
	}
	return fmt.Errorf("%w: %w: task %s: %s", bgtask.ErrInvalidAction, bgtask.ErrCorrupt, m.ID, why)
}

// validOwner is the Manager's rule: an owner id is not empty or blank.
func validOwner(owner string) bool {
	for i := 0; i < len(owner); i++ {
		if c := owner[i]; c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return true
		}
	}
	return false
}
