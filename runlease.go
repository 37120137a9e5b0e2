package bgtask

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"
)

// One open run per owner across a fleet. With a store that is a
// store.RunLeaser (pgstore), the run a Receiver opens is also recorded in
// the store, so that a thread whose turns land on several instances never
// has two runs open at once (each would hand its events out). A
// sub-agent's Receiver (on the sub-agent's own inbox) runs where its task
// runs and takes no lease.
//
// The lease also carries what an aborted run handed out (heard.go): the
// ends are in the thread's conversation, not yet heard, and the owner's
// next run takes them as carried wherever it opens, instead of handing
// them out again from their records.

// leaser returns the store's RunLeaser for r, nil when runs need none.
func (r *Receiver) leaser() store.RunLeaser {
	if r.fixed != nil {
		return nil
	}
	l, _ := r.owner.m.store.(store.RunLeaser)
	return l
}

// openLease records run as the owner's open run in the store, and takes
// the ends the owner's previous run carried. Another instance's open run
// is ErrRunOpen. Called with r.mu held.
func (r *Receiver) openLease(ctx context.Context, run string) error {
	l := r.leaser()
	if l == nil {
		return nil
	}
	carried, err := l.OpenRun(ctx, r.owner.id, run, r.owner.m.cfg.instance)
	switch {
	case errors.Is(err, store.ErrRunHeld):
		return fmt.Errorf("%w: on another instance", ErrRunOpen)
	case err != nil:
		return fmt.Errorf("bgtask: receiver: open the run: %w", err)
	}
	r.takeCarried(ctx, carried)
	return nil
}

// takeCarried makes the ends an aborted run of the owner handed out (on
// this instance or another) this Receiver's carried ends: they are not
// handed out again, and the run's second boundary marks them heard, as
// when the aborted run was this Receiver's. An end already heard, or
// already held here, is skipped. Called with r.mu held, before Restore,
// which then leaves them alone (m.sent).
func (r *Receiver) takeCarried(ctx context.Context, ids []string) {
	if len(ids) == 0 {
		return
	}
	m := r.owner.m
	var evs []bgtype.Event
	for _, id := range ids {
		if r.heard.has(id) || m.sent.has(id) {
			continue
		}
		meta, err := m.store.Get(ctx, id)
		if err != nil || meta.Announced || !meta.Status.IsTerminal() {
			continue // gone, heard, or not an end: nothing to carry
		}
		m.sent.add(r.owner.id, meta.Owner, id)
		evs = append(evs, terminalEvent(&meta))
	}
	if len(evs) == 0 {
		return
	}
	if r.heard == nil {
		r.heard = &hearing{}
	}
	r.heard.unheard = append(r.heard.unheard, evs...)
	r.heard.carried = true
}

// carriedIDs returns the tasks whose ends r carries out of an aborted run.
// Called with r.mu held.
func (r *Receiver) carriedIDs() []string {
	h := r.heard
	if h == nil || !h.carried {
		return nil
	}
	var ids []string
	for i := range h.unheard {
		if h.unheard[i].Kind.IsTerminal() {
			ids = append(ids, h.unheard[i].TaskID)
		}
	}
	return ids
}

// closeLease releases the owner's run in the store, leaving carried for
// the owner's next run. A failure is logged and retried in the background
// (retryCloseRun): until the release lands, another instance cannot open
// a run of the owner.
func (r *Receiver) closeLease(ctx context.Context, run string, carried []string) {
	l := r.leaser()
	if l == nil {
		return
	}
	m, owner := r.owner.m, r.owner.id
	err := l.CloseRun(context.WithoutCancel(ctx), owner, run, m.cfg.instance, carried)
	if err == nil {
		return
	}
	m.log.Warn("bgtask: receiver: the run's lease not released; retrying", "owner", owner, "run_id", run, "err", err)
	m.startHelper(func() { m.retryCloseRun(l, owner, run, carried) })
}

// Bounds of the backoff between two attempts to release a run's lease.
const (
	closeRunBackoffMin = 100 * time.Millisecond
	closeRunBackoffMax = 10 * time.Second
)

// retryCloseRun releases owner's run run in l, with a backoff between
// attempts, until it succeeds or m begins to close (the store then frees
// the run: a stopped instance holds none). A run the instance opened
// since for the owner replaced this one in the store: the release then
// finds nothing to release, and succeeds.
func (m *Manager) retryCloseRun(l store.RunLeaser, owner, run string, carried []string) {
	backoff := closeRunBackoffMin
	for {
		t := time.NewTimer(backoff)
		select {
		case <-m.closing:
			t.Stop()
			return
		case <-t.C:
		}
		err := l.CloseRun(context.Background(), owner, run, m.cfg.instance, carried)
		if err == nil {
			m.log.Info("bgtask: receiver: the run's lease released", "owner", owner, "run_id", run)
			return
		}
		backoff = min(2*backoff, closeRunBackoffMax)
		m.log.Warn("bgtask: receiver: the run's lease not released; retrying", "owner", owner, "run_id", run, "err", err, "backoff", backoff)
	}
}
