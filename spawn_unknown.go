package bgtask

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/internal/clock"
	"github.com/bgtask/bgtask/internal/jsoncap"
	"github.com/bgtask/bgtask/store"
)

// settleTimeout bounds each attempt of the write that ends the record of a
// spawn whose first commit failed.
const settleTimeout = 5 * time.Second

// settleFailedSpawn makes sure that a spawn whose first commit failed
// leaves no record, as Spawn's doc says of its errors: the store may have
// committed it all the same (the context ended, say by a Shutdown that
// cancelled the spawning task, or the connection did, after the statement
// was sent), and then nobody would ever end it, or its owner would hear of
// a task whose Spawn returned an error. It reads the record back and, if
// it is there and live, ends it failed and announced and removes it, in
// one commit (were the remove lost, the owner still hears nothing: the
// spawn's error already told the caller); each try on a fresh context
// bounded by settleTimeout, retried like every commit
// (Tuning.CommitAttempts). A record that is not there did not land:
// nothing is written. If every try fails, the record stays live for
// recovery, which interrupts it and tells its owner once. An invalid
// record, or a commit called with a context that had ended already, was
// refused before anything was written; the in-memory store applies nothing
// once it has failed.
func (m *Manager) settleFailedSpawn(rec bgtype.TaskMeta, cause error, ctxDoneBefore bool) {
	if !m.durable() || ctxDoneBefore || errors.Is(cause, store.ErrInvalidAction) || errors.Is(cause, bgtype.ErrInvalidOwner) {
		return
	}
	rec.Status, rec.ErrorKind, rec.FinishedAt, rec.Announced = bgtype.StatusFailed, bgtype.KindError, clock.Now(), true
	rec.Error, _ = jsoncap.Text(fmt.Sprintf("bgtask: spawn failed: the commit of its first record returned: %v; the task never ran", cause), m.cfg.caps.MaxErrorBytes)
	backoff := m.cfg.tuning.CommitBackoff
	var err error
	for attempt := range m.cfg.tuning.CommitAttempts {
		if attempt > 0 {
			time.Sleep(backoff)
			backoff *= 2
		}
		ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
		var got bgtype.TaskMeta
		got, err = m.store.Get(ctx, rec.ID)
		switch {
		case errors.Is(err, ErrNotFound):
			cancel()
			return // it did not land
		case err == nil && got.Status.IsTerminal():
			cancel()
			return
		case err == nil:
			err = m.store.Commit(ctx, rec.Owner, store.UpsertAction(rec), store.AnnounceAction(rec.ID), store.RemoveAction(rec.ID))
		}
		cancel()
		if err == nil {
			return
		}
		m.logCommitFailure(&rec, attempt, err)
	}
	m.log.Error("bgtask: the record of a failed spawn could not be ended; recovery will interrupt it", "task_id", rec.ID, "err", err)
}
