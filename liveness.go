package bgtask

import "context"

// InstanceLiveness is a Store, shared by processes that each run their own
// Manager on it (a file several processes open), that can tell whether the
// runtime instance that wrote a record still runs. Restore uses it: a
// record that another instance left queued or running is interrupted only
// once that instance is known to be gone, never while the process that
// runs the task may still end it. A SharedStore needs no such answer: its
// reaper ends the records of the instances that stopped, and Restore
// leaves every other instance's records to it.
type InstanceLiveness interface {
	// InstanceAlive reports whether the runtime instance (a Manager's
	// WithInstance id) still runs in a process that uses the store.
	// Restore interrupts the records of an instance reported gone, so a
	// store reports alive when unsure, and documents any exception (a
	// platform where it cannot tell). The empty instance is never alive.
	InstanceAlive(ctx context.Context, instance string) (bool, error)
}

// aliveElsewhere reports whether meta's record belongs to another runtime
// instance that the store knows to be alive; known caches the answers of
// one Restore step.
func (m *Manager) aliveElsewhere(ctx context.Context, l InstanceLiveness, known map[string]bool, meta *TaskMeta) (bool, error) {
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
