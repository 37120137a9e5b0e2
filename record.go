package bgtask

import (
	"context"
	"time"

	"github.com/bgtask/bgtask/internal/memstore"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"
)

// A task's record lives in one place when it can. With the default
// in-memory store, the store keeps the very record the spawn made (t.rec, in
// compact form), inside the entry that links it into the store's lists,
// and changes it under its own lock; the Task reads its identity fields,
// which never change, and reads the rest through readRecord. With any
// other Store, t.rec is the Task's private copy, updated after each
// commit. Sharing saves a copy of every live record and an allocation per
// spawn.

// newTaskRecord returns a new Task of m with t.rec made: in the entry the
// in-memory store will keep it in when the store is one (returned, for
// commitFirst), else on its own. The Task and its record are one
// allocation: the Task points at its record for its whole life, and the
// store keeps a live entry only while the task is live (a terminal record
// is a copy, memstore's newDone), so neither keeps the other longer.
func (m *Manager) newTaskRecord() (*Task, *memstore.Entry) {
	if m.mem == nil {
		tr := new(taskRec)
		tr.t.rec = &tr.rec
		return &tr.t, nil
	}
	te := new(taskEntry)
	te.t.rec, te.t.ent = &te.e.Rec, &te.e
	return &te.t, &te.e
}

// taskEntry is a Task and the entry of its record, allocated together.
type taskEntry struct {
	t Task
	e memstore.Entry
}

// taskRec is a Task and its private record, allocated together.
type taskRec struct {
	t   Task
	rec memstore.Rec
}

// commitFirst commits the task's first record; e is what newTaskRecord returned.
func (m *Manager) commitFirst(ctx context.Context, t *Task, e *memstore.Entry, waiting bool) error {
	if m.mem != nil && !waiting {
		if ok, err := m.mem.CommitNew(ctx, e); ok || err != nil {
			return err
		}
	}
	u := t.rec.Expand()
	if waiting { // it waits in the queue for a claim (spawnQueued)
		u.Status, u.Instance = bgtype.StatusQueued, ""
	}
	if m.mem != nil {
		return m.mem.CommitOne(ctx, &u, e)
	}
	return m.store.Commit(ctx, u.Owner, store.UpsertAction(u))
}

// commitUpdate commits u, a changed copy of the task's record, retrying with
// doubling backoff (Tuning.CommitAttempts, Tuning.CommitBackoff). A private record follows u even when
// the commit fails, so Wait reports the outcome the owner is told about.
func (m *Manager) commitUpdate(t *Task, u *bgtype.TaskMeta) error {
	var err error
	backoff := m.cfg.tuning.CommitBackoff
	for attempt := range m.cfg.tuning.CommitAttempts {
		if attempt > 0 {
			time.Sleep(backoff)
			backoff *= 2
		}
		if m.mem != nil {
			err = m.mem.CommitOne(context.Background(), u, nil)
		} else {
			err = m.store.Commit(context.Background(), u.Owner, store.UpsertAction(*u))
		}
		if err == nil {
			break
		}
		m.logCommitFailure(u, attempt, err)
	}
	if m.mem == nil {
		t.rec.SetMutable(u) // identity fields stay: others read them without a lock
	}
	return err
}

// commitEdit reads the task's record into u, applies edit and commits it
// as commitUpdate does. With a shared in-memory record the read and the
// commit are one critical section of the store's lock: one lock round
// instead of two on every task's end.
func (m *Manager) commitEdit(t *Task, u *bgtype.TaskMeta, edit *terminalEdit) error {
	if m.mem != nil {
		m.mem.CommitEdit(t.rec, u, edit)
		return nil
	}
	m.readRecord(t, u)
	edit.Apply(u)
	return m.commitUpdate(t, u)
}

// readRecord copies the task's current record into dst.
func (m *Manager) readRecord(t *Task, dst *bgtype.TaskMeta) {
	if m.mem != nil {
		m.mem.Read(t.rec, dst)
		return
	}
	t.rec.ExpandInto(dst)
}
