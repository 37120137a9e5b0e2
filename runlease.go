package bgtask

import (
	"context"
	"errors"
	"fmt"

	"github.com/bgtask/bgtask/store"
)

// One open run per owner across a fleet. With a store that is a
// store.RunLeaser (pgstore), the run a Receiver opens is also recorded in
// the store, so that a thread whose turns land on several instances never
// has two runs open at once (each would hand its events out). A
// sub-agent's Receiver (on the sub-agent's own inbox) runs where its task
// runs and takes no lease.

// leaser returns the store's RunLeaser for r, nil when runs need none.
func (r *Receiver) leaser() store.RunLeaser {
	if r.fixed != nil {
		return nil
	}
	l, _ := r.owner.m.store.(store.RunLeaser)
	return l
}

// openLease records run as the owner's open run in the store. Another
// instance's open run is ErrRunOpen. Called with r.mu held.
func (r *Receiver) openLease(ctx context.Context, run string) error {
	l := r.leaser()
	if l == nil {
		return nil
	}
	switch err := l.OpenRun(ctx, r.owner.id, run, r.owner.m.cfg.instance); {
	case errors.Is(err, store.ErrRunHeld):
		return fmt.Errorf("%w: on another instance", ErrRunOpen)
	case err != nil:
		return fmt.Errorf("bgtask: receiver: open the run: %w", err)
	}
	return nil
}

// closeLease releases the owner's run in the store. A failure is logged:
// the run stays recorded until this instance opens the owner's next run
// (which replaces it) or stops.
func (r *Receiver) closeLease(ctx context.Context, run string) {
	l := r.leaser()
	if l == nil {
		return
	}
	if err := l.CloseRun(context.WithoutCancel(ctx), r.owner.id, run, r.owner.m.cfg.instance); err != nil {
		r.owner.m.log.Warn("bgtask: receiver: the run's lease not released; this instance's next run of the owner takes it over", "owner", r.owner.id, "run_id", run, "err", err)
	}
}
