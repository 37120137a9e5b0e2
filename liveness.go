package bgtask

import (
	"context"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"
)

// aliveElsewhere reports whether meta's record belongs to another runtime
// instance that the store knows to be alive; known caches the answers of
// one Restore step.
func (m *Manager) aliveElsewhere(ctx context.Context, l store.InstanceLiveness, known map[string]bool, meta *bgtype.TaskMeta) (bool, error) {
	if l == nil || meta.Instance == m.cfg.instance {
		return false, nil
	}
	alive, ok := known[meta.Instance]
	if !ok {
		var err error
		if alive, err = l.InstanceAlive(ctx, meta.Instance); err != nil {
			return false, err
		}
		known[meta.Instance] = alive
	}
	return alive, nil
}
