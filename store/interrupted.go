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
	meta.Input = nil
	return meta
}
