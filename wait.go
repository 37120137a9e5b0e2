package bgtask

import (
	"context"
	"fmt"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"
)

// Wait blocks until the task is terminal and returns its final record. For a
// task this Manager runs, it returns after the terminal record is committed
// and the terminal event delivered. For a task that another instance runs,
// with a store that tells when records settle (store.ChangeNotifier, as
// pgstore), it returns once the terminal record is committed there (or the
// reaper interrupted it, that instance being gone). For any other task
// that is only in the Store it returns the record at once: terminal, or
// with ErrNotLive when nothing here will ever finish it (an error that
// matches ErrElsewhere too when another live process runs it, which the
// store cannot wait on). If ctx ends first it returns ctx's error.
//
// For a failed task it returns the record and a *TaskError (its kind and
// text; errors.Is(err, ErrTimeout) when its time ran out), as a function
// that waits for work expects; every other terminal status gives a nil
// error.
func (m *Manager) Wait(ctx context.Context, id string) (bgtype.TaskMeta, error) {
	return withTaskError(m.wait(ctx, everyOwner, id))
}

// withTaskError adds the *TaskError of a failed record to a wait's result.
func withTaskError(meta bgtype.TaskMeta, err error) (bgtype.TaskMeta, error) {
	if err == nil {
		err = failedError(&meta)
	}
	return meta, err
}

func (m *Manager) wait(ctx context.Context, r reach, id string) (bgtype.TaskMeta, error) {
	t, done := m.waitable(id)
	if t != nil {
		if !r.covers(t.rec.Owner) {
			return bgtype.TaskMeta{}, fmt.Errorf("%w: %s", ErrNotFound, id)
		}
		select {
		case <-done:
			return m.record(t), nil
		case <-ctx.Done():
			return bgtype.TaskMeta{}, ctx.Err()
		}
	}
	return m.storedForWait(ctx, r, id, false)
}

// waitable returns the task id if this Manager still holds it, with the
// channel closed once its terminal event is delivered.
func (m *Manager) waitable(id string) (*Task, chan struct{}) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.nodes[id] // still there until its terminal event is delivered
	if t == nil {
		return nil, nil
	}
	r := t.rareState()
	if r.done == nil {
		r.done = make(chan struct{}) // most tasks are never waited for
		if t.phase == phaseGone {
			close(r.done)
		}
	}
	return t, r.done
}

// record returns a copy of the task's current record.
func (m *Manager) record(t *Task) bgtype.TaskMeta {
	var meta bgtype.TaskMeta
	m.readRecord(t, &meta)
	return meta.Clone()
}

// storedForWait answers a wait for a task this Manager does not hold: its
// record if terminal (or awaiting input, when that settles the wait); for a
// task another instance runs, with a store that tells when records settle
// (store.ChangeNotifier), the record once it settles; otherwise the record
// with ErrNotLive.
func (m *Manager) storedForWait(ctx context.Context, r reach, id string, inputSettles bool) (bgtype.TaskMeta, error) {
	meta, err := m.store.Get(ctx, id)
	switch {
	case err != nil:
		return bgtype.TaskMeta{}, err
	case !r.covers(meta.Owner):
		return bgtype.TaskMeta{}, fmt.Errorf("%w: %s", ErrNotFound, id)
	case settles(meta.Status, inputSettles):
		return meta, nil
	}
	if cn, ok := m.store.(store.ChangeNotifier); ok && meta.Instance != m.cfg.instance {
		return m.waitElsewhere(ctx, cn, meta, inputSettles)
	}
	if m.runsElsewhere(ctx, &meta) {
		return meta, elsewhereError(&meta, ErrNotLive)
	}
	return meta, fmt.Errorf("%w: %s is %s", ErrNotLive, id, meta.Status)
}

// waitSettled is wait that also returns when the task opens an input
// request (awaiting_input): what the wait_task tool waits for. The returned
// record is terminal or awaiting_input. A request answered before this call
// saw it does not end the wait.
func (m *Manager) waitSettled(ctx context.Context, r reach, id string) (bgtype.TaskMeta, error) {
	t, done := m.waitable(id)
	if t == nil {
		return m.storedForWait(ctx, r, id, true)
	}
	if !r.covers(t.rec.Owner) {
		return bgtype.TaskMeta{}, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	for {
		t.emitMu.Lock()
		if t.awaitsInput() { // the record is awaiting_input while emitMu is held
			meta := m.record(t)
			t.emitMu.Unlock()
			return meta, nil
		}
		var sig chan struct{}
		if !t.ended {
			r := t.rareState()
			if r.inputSig == nil {
				r.inputSig = make(chan struct{})
			}
			sig = r.inputSig
		}
		t.emitMu.Unlock()
		select {
		case <-done:
			return m.record(t), nil
		case <-sig: // nil once the function has returned: only done is left
		case <-ctx.Done():
			return bgtype.TaskMeta{}, ctx.Err()
		}
	}
}

// WaitSettled blocks until one of the owner's tasks is terminal or asks for
// input (awaiting_input, with its open request in Input), and returns its
// record: what the wait_task tool waits for, for a server that forwards an
// input request to its client. An open request returns at once; one that
// was answered before this call saw it does not end the wait. For a task
// that is only in the Store it returns the record at once when it is
// terminal or awaiting input, otherwise the record with ErrNotLive. If ctx
// ends first it returns ctx's error. Like Wait, a failed task gives its
// record and a *TaskError. ErrNotFound for an unknown task or another
// owner's. Safe for concurrent use.
func (o Owner) WaitSettled(ctx context.Context, id string) (bgtype.TaskMeta, error) {
	if !bgtype.ValidOwner(o.id) {
		return bgtype.TaskMeta{}, bgtype.ErrInvalidOwner
	}
	return withTaskError(o.m.waitSettled(ctx, ownerReach(o.id), id))
}
