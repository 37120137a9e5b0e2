package store

import (
	"fmt"
	"time"

	"github.com/bgtask/bgtask/bgtype"
)

// Interrupted returns the update that ends meta, a record whose runtime
// instance is gone, as interrupted at at: fenced on the next attempt, with
// the error kind KindInterrupted and an error naming the instance. Restore
// and every OrphanInterrupter use it, so an interrupted record reads the same
// whoever ended it.
func Interrupted(meta bgtype.TaskMeta, at time.Time) bgtype.TaskMeta {
	meta.Status, meta.FinishedAt, meta.Attempt = bgtype.StatusInterrupted, at, meta.Attempt+1
	meta.ErrorKind = bgtype.KindInterrupted
	meta.Error = fmt.Sprintf("bgtask: interrupted: the runtime that ran it (instance %q) is gone; it will not be re-run", meta.Instance)
	meta.Input, meta.MoreInput = nil, nil
	return meta
}

// Orphaned returns the update for meta, a live record whose runtime
// instance is gone, at at. A resumable task (one with a Resume) that has
// attempts left goes back to the queue, to be claimed by a live instance
// that registered its kind (Requeued); one that has none ends interrupted
// with an error that says how many attempts it took; any other record
// ends interrupted (Interrupted). Every path that finds a gone instance's
// records uses it, so a record reads the same whoever found it. A record
// that waits in the queue for a claim (Waiting) is no instance's: callers
// leave it alone.
func Orphaned(meta bgtype.TaskMeta, at time.Time) bgtype.TaskMeta {
	r := meta.Resume
	if r == nil {
		return Interrupted(meta, at)
	}
	why := fmt.Sprintf("the runtime that ran it (instance %q) is gone", meta.Instance)
	if r.Counted(meta.Attempt) < r.Limit() || r.Ask {
		// With Ask, an exhausted task goes back to the queue too: the
		// instance that claims it asks its owner before another attempt.
		return Requeued(meta, at, why, false)
	}
	return Exhausted(Interrupted(meta, at), why)
}

// Exhausted rewrites the error of end, the terminal update of a resumable
// task that took its last attempt, so that it says so: how many attempts
// it took, why the last one ended, and when its last checkpoint was saved.
func Exhausted(end bgtype.TaskMeta, why string) bgtype.TaskMeta {
	r := end.Resume
	if r == nil {
		return end
	}
	msg := fmt.Sprintf("bgtask: %s: gave up after %d attempts (kind %s): %s", end.Status, r.Limit(), r.Kind, why)
	if r.SavedBy > 0 {
		msg += fmt.Sprintf("; its last checkpoint was saved by attempt %d at %s", r.SavedBy, r.SavedAt.UTC().Format(time.RFC3339))
	}
	end.Error = msg
	return end
}

// Requeued returns the update that puts meta, the live record of a
// resumable task, back in the queue at at, as a new attempt that any live
// instance that registered its kind may claim: status queued, the next
// Attempt (so every write of the attempt it replaces is dropped), no
// instance, why as the last error. The checkpoint is kept. A yield (the
// attempt wound down for a stop) costs no attempt: it is counted in
// Resume.Yields.
func Requeued(meta bgtype.TaskMeta, at time.Time, why string, yield bool) bgtype.TaskMeta {
	r := meta.Resume.Clone()
	if yield {
		r.Yields++
	}
	r.QueuedAt, r.LastError = at, why
	meta.Resume = r
	meta.Status, meta.Attempt, meta.Instance = bgtype.StatusQueued, meta.Attempt+1, ""
	meta.Input, meta.MoreInput = nil, nil
	return meta
}

// Waiting reports whether meta is the record of a resumable task that
// waits in the queue for a live instance to claim it: no instance holds
// it, so no instance's death concerns it.
func Waiting(meta *bgtype.TaskMeta) bool {
	return meta.Resume != nil && meta.Status == bgtype.StatusQueued && meta.Instance == ""
}
