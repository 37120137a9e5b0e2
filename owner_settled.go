package bgtask

import (
	"context"

	"github.com/bgtask/bgtask/bgtype"
)

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

// MaxResultBytes returns the cap on a completed task's result in its record
// and events (Caps.MaxResultBytes, 64 KiB by default): a
// longer result, as JSON, is replaced by a truncation marker. A server that
// must hand a client the whole result keeps those past it itself.
func (m *Manager) MaxResultBytes() int { return m.cfg.caps.MaxResultBytes }
