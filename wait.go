package bgtask

import (
	"context"
	"fmt"
)

// Wait blocks until the task is terminal and returns its final record. For a
// task this Manager runs, it returns after the terminal record is committed
// and the terminal event delivered. For a task that is only in the Store it
// returns the record at once: terminal, or with ErrNotLive when nothing here
// will ever finish it. If ctx ends first it returns ctx's error.
func (m *Manager) Wait(ctx context.Context, id string) (TaskMeta, error) {
	return m.wait(ctx, "", id)
}

func (m *Manager) wait(ctx context.Context, owner, id string) (TaskMeta, error) {
	m.mu.Lock()
	t := m.nodes[id] // still there until its terminal event is delivered
	var done chan struct{}
	if t != nil {
		if t.done == nil {
			t.done = make(chan struct{}) // most tasks are never waited for
			if t.gone {
				close(t.done)
			}
		}
		done = t.done
	}
	m.mu.Unlock()
	if t != nil {
		if owner != "" && t.rec.Owner != owner {
			return TaskMeta{}, fmt.Errorf("%w: %s", ErrNotFound, id)
		}
		select {
		case <-done:
			var meta TaskMeta
			m.readRecord(t, &meta)
			return cloneMeta(meta), nil
		case <-ctx.Done():
			return TaskMeta{}, ctx.Err()
		}
	}
	meta, err := m.store.Get(ctx, id)
	switch {
	case err != nil:
		return TaskMeta{}, err
	case owner != "" && meta.Owner != owner:
		return TaskMeta{}, fmt.Errorf("%w: %s", ErrNotFound, id)
	case !meta.Status.IsTerminal():
		return meta, fmt.Errorf("%w: %s is %s", ErrNotLive, id, meta.Status)
	}
	return meta, nil
}
