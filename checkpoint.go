package bgtask

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/internal/clock"
)

// Checkpoint is an attempt's handle on its task's checkpoint: Last is what
// the previous attempts saved, Save replaces it. It is made for each
// attempt and given to the kind's function; its methods are safe for
// concurrent use, and one Save at a time is in flight (a second waits).
type Checkpoint[C any] struct {
	t       *Task
	k       interface{ checkpointCap() int }
	attempt int64 // the record's attempt this one runs as: the fence of every Save

	mu      sync.Mutex // serializes Save; guards the fields below
	last    C
	has     bool
	savedAt time.Time
	savedBy int64
}

func (k *Kind[S, C]) checkpointCap() int { return k.cfg.MaxCheckpointBytes }

// load reads the record's last checkpoint.
func (c *Checkpoint[C]) load(r *bgtype.Resume) error {
	if r == nil || r.Checkpoint == nil {
		return nil
	}
	if err := json.Unmarshal(r.Checkpoint, &c.last); err != nil {
		return fmt.Errorf("bgtask: kind %s: the checkpoint saved by attempt %d no longer decodes: %w", r.Kind, r.SavedBy, err)
	}
	c.has, c.savedAt, c.savedBy = true, r.SavedAt, r.SavedBy
	return nil
}

// Last returns the last checkpoint saved, by this attempt or an earlier
// one, and true; the zero C and false before any.
func (c *Checkpoint[C]) Last() (C, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last, c.has
}

// SavedAt returns when the last checkpoint was saved; zero before any.
func (c *Checkpoint[C]) SavedAt() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.savedAt
}

// Save makes v the task's checkpoint, durably: when it returns nil the
// store holds it, and the next attempt (in this process or another, after
// a crash) starts from it. It fails, changing nothing, with an error
// matching ErrTooLarge when v encodes to more than the kind's
// MaxCheckpointBytes, ErrInvalidArgument when it does not encode, and
// ErrSuperseded when this attempt is no longer the task's current one (a
// stop or a recovery requeued it, another instance took it over): the
// function should then return at once; its result is dropped. A Store
// error is returned wrapped, after the Manager's commit retries; ctx's
// error if ctx ends first (the save may then have landed or not).
func (c *Checkpoint[C]) Save(ctx context.Context, v C) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return invalidArgument("checkpoint does not encode: %v", err)
	}
	if limit := c.k.checkpointCap(); len(raw) > limit {
		return fmt.Errorf("%w: checkpoint of %d bytes, the cap is %d", ErrTooLarge, len(raw), limit)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.t
	u := t.record()
	if u.Attempt != c.attempt || u.Status.IsTerminal() || u.Resume == nil {
		return fmt.Errorf("%w (attempt %d; the record is on attempt %d, %s)", ErrSuperseded, c.attempt, u.Attempt, u.Status)
	}
	at := clock.Now()
	u.Resume.Checkpoint, u.Resume.SavedAt, u.Resume.SavedBy = raw, at, c.attempt
	if err := t.m.commitUpdate(t, &u); err != nil {
		if serr := t.m.checkSaved(ctx, t, c.attempt, at); errors.Is(serr, ErrSuperseded) {
			return fmt.Errorf("%w: %w", serr, err) // refused because another attempt took over (a reaped instance's write)
		}
		return fmt.Errorf("bgtask: checkpoint: %w", err)
	}
	if err := t.m.checkSaved(ctx, t, c.attempt, at); err != nil {
		return err
	}
	c.last, c.has, c.savedAt, c.savedBy = v, true, at, c.attempt
	return nil
}

// checkSaved reads back the record a Save committed: the store drops a
// write of a superseded attempt without an error, so only the record says
// whether it landed.
func (m *Manager) checkSaved(ctx context.Context, t *Task, attempt int64, at time.Time) error {
	var got bgtype.TaskMeta
	if m.mem != nil {
		m.mem.Read(t.rec, &got)
	} else {
		var err error
		if got, err = m.store.Get(ctx, t.rec.ID); err != nil {
			return fmt.Errorf("bgtask: checkpoint: read back: %w", err)
		}
	}
	if got.Attempt != attempt || got.Resume == nil || got.Resume.SavedBy != attempt || !got.Resume.SavedAt.Equal(at) {
		if m.mem == nil {
			t.rec.SetMutable(&got) // the private copy follows the store, not the dropped write
		}
		return fmt.Errorf("%w (attempt %d; the record is on attempt %d, %s)", ErrSuperseded, attempt, got.Attempt, got.Status)
	}
	return nil
}
