// Progress on the record: what a task reports with ReportProgress, kept
// in its TaskMeta and written to the Store at most once per interval.

package bgtask

import (
	"context"
	"time"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/internal/clock"
	"github.com/bgtask/bgtask/internal/jsoncap"
	"github.com/bgtask/bgtask/store"
)

// progressState is a task's throttled progress writer. Guarded by the
// task's emitMu.
type progressState struct {
	latest  *bgtype.Progress // the last report
	written *bgtype.Progress // the last one written, or being written
	last    time.Time        // when the last write started
	busy    bool             // a write is in flight
	timer   *time.Timer      // the trailing write, if one is scheduled
	idle    chan struct{}    // made by finish while a write is in flight; closed when it ends
}

// ReportProgress records how far the task has come: done out of total
// (total 0 when the total is not known) and a short message, cut to
// Caps.MaxMessageBytes. It is the typed form of progress: besides emitting a
// custom event of type EventTypeProgress whose payload is the Progress
// (delivered, coalesced and kept as Owner.LatestEvent like every Emit), it
// keeps the value on the task's record (TaskMeta.Progress), where get_task,
// list_tasks and the prompt view show it and where it survives a restart.
// Owner.LatestEvent is the latest custom event of any type, in memory, while
// the task runs here; TaskMeta.Progress is only what ReportProgress
// reported, in the Store.
//
// The record is written at most once per Tuning.ProgressInterval, in another
// goroutine: ReportProgress never waits for the Store. The latest value
// always reaches the record, at the latest with the terminal record. A
// write that fails is logged and superseded by the next.
//
// A negative done or total, or done above a non-zero total, returns an
// error matching ErrInvalidArgument and records nothing. Once the function
// has returned, it returns ErrTerminal. Safe for concurrent use; the
// latest call wins.
func (t *Task) ReportProgress(done, total int64, message string) error {
	if done < 0 || total < 0 || total > 0 && done > total {
		return invalidArgument("progress %d of %d: need 0 <= done and, with a total, done <= total", done, total)
	}
	message, _ = jsoncap.Text(message, t.m.cfg.caps.MaxMessageBytes)
	p := &bgtype.Progress{Done: done, Total: total, Message: message, At: clock.Now()}
	if err := t.Emit(bgtype.EventTypeProgress, p); err != nil {
		return err
	}
	t.emitMu.Lock()
	defer t.emitMu.Unlock()
	if t.ended {
		return errTaskEnded
	}
	st := t.progressState()
	if st.latest != nil && p.At.Before(st.latest.At) {
		return nil // a concurrent later report won
	}
	st.latest = p
	t.m.kickProgress(t, st)
	return nil
}

// progressState returns the task's progress writer, made on first use.
// Called with emitMu held.
func (t *Task) progressState() *progressState {
	r := t.rareState()
	if r.prog == nil {
		r.prog = new(progressState)
	}
	return r.prog
}

// kickProgress starts a write of the latest progress if none is in flight
// or scheduled and the interval since the last one has passed, or else
// schedules one for when it has. Called with t.emitMu held.
func (m *Manager) kickProgress(t *Task, st *progressState) {
	if st.busy || st.timer != nil || t.ended || st.latest == st.written {
		return
	}
	if wait := st.last.Add(m.cfg.tuning.ProgressInterval).Sub(time.Now()); wait > 0 && !st.last.IsZero() {
		st.timer = time.AfterFunc(wait, func() { m.progressDue(t) })
		return
	}
	st.busy, st.last, st.written = true, time.Now(), st.latest
	go m.writeProgress(t, st.latest)
}

// progressDue is the trailing write's timer.
func (m *Manager) progressDue(t *Task) {
	t.emitMu.Lock()
	st := t.rare.Load().prog
	st.timer = nil
	if t.ended || st.busy || st.latest == st.written {
		t.emitMu.Unlock()
		return
	}
	st.busy, st.last, st.written = true, time.Now(), st.latest
	p := st.latest
	t.emitMu.Unlock()
	m.writeProgress(t, p)
}

// writeProgress writes p to the task's record with an update that carries
// no status, so it changes nothing but the progress, then starts the next
// write if a newer report came meanwhile.
func (m *Manager) writeProgress(t *Task, p *bgtype.Progress) {
	u := bgtype.TaskMeta{ID: t.rec.ID, Owner: t.rec.Owner, Progress: p} // attempt 0, the Manager's: a reaper's later attempt fences it out
	if err := m.store.Commit(context.Background(), u.Owner, store.UpsertAction(u)); err != nil {
		m.log.Warn("bgtask: progress not recorded", "task_id", u.ID, "err", err)
	}
	t.emitMu.Lock()
	defer t.emitMu.Unlock()
	st := t.rare.Load().prog
	st.busy = false
	if st.idle != nil {
		close(st.idle)
		st.idle = nil
	}
	m.kickProgress(t, st)
}

// settleProgress stops the task's progress writer once the function has
// returned (t.ended is set), waiting for a write in flight, and returns the
// latest progress for the terminal record, or nil.
func (t *Task) settleProgress() *bgtype.Progress {
	r := t.rare.Load()
	if r == nil {
		return nil
	}
	t.emitMu.Lock()
	st := r.prog
	if st == nil {
		t.emitMu.Unlock()
		return nil
	}
	if st.timer != nil && st.timer.Stop() {
		st.timer = nil
	}
	var idle chan struct{}
	if st.busy {
		st.idle = make(chan struct{})
		idle = st.idle
	}
	p := st.latest
	t.emitMu.Unlock()
	if idle != nil {
		<-idle
	}
	return p
}

// LatestProgress returns the latest progress the owner's task id reported
// (Task.ReportProgress) while this Manager runs it, and true; false if it
// reported none, has ended, is not run here or is another owner's (the
// shape of LatestEvent). The record (TaskMeta.Progress) is written at most
// once per Tuning.ProgressInterval, so a later report may be in memory
// only: a host that shows a task's progress to a model shows this one when
// there is one. It never blocks on the task.
func (o Owner) LatestProgress(id string) (bgtype.Progress, bool) {
	m := o.m
	m.mu.Lock()
	t := m.nodes[id]
	if t == nil || t.phase == phaseGone || t.rec.Owner != o.id {
		m.mu.Unlock()
		return bgtype.Progress{}, false
	}
	m.mu.Unlock()
	r := t.rare.Load()
	if r == nil {
		return bgtype.Progress{}, false
	}
	t.emitMu.Lock()
	defer t.emitMu.Unlock()
	if r.prog == nil || r.prog.latest == nil {
		return bgtype.Progress{}, false
	}
	return *r.prog.latest, true
}
