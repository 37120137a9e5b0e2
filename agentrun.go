package bgtask

import "github.com/bgtask/bgtask/internal/memstore"

// runKey names a run: a run id is chosen by its owner's loop ("run-1" in
// every example), so two owners may use the same one. Keying runs by the
// pair keeps a cancel of one owner's run, and the refusal of later spawns
// into it, away from another owner's run of the same id.
type runKey struct {
	owner string
	run   string
}

// runState is what the Manager keeps of a run with live tasks, or of a
// cancelled one (see retireRun). Guarded by m.mu.
type runState struct {
	canceled bool
	live     int
	head     *Task // intrusive list of live tasks of the run
}

// taskRun returns the key of the run a task belongs to: its owner's run of
// its run id. ok is false for a task in no run, or a detached one (it
// outlives its run).
func taskRun(r *memstore.Rec) (key runKey, ok bool) {
	if r.ParentRun() == "" || r.Detached {
		return runKey{}, false
	}
	return runKey{owner: r.Owner, run: r.ParentRun()}, true
}
