package bgtask

import (
	"context"

	"github.com/bgtask/bgtask/bgtype"
)

// answered is called when a call returned the terminal record meta to the
// model as its result (wait_task, or Owner.Foreground joining a task that
// another call started): the owner must not hear of that end a second
// time. The task's terminal event, if it still waits in the owner's inbox,
// is taken out, and the record is marked announced, so neither the next
// step boundary nor a restart announces it again: the end is delivered
// once, as a task that ends in the foreground is. An event that a Receiver
// handed out already, or keeps between runs, is not reached; a mark that
// cannot be committed is logged, and a restart may then announce the end
// once more.
func (o Owner) answered(ctx context.Context, meta *bgtype.TaskMeta) {
	if !meta.Status.IsTerminal() || meta.Wake == bgtype.WakeSilent || meta.Announced {
		return
	}
	o.m.inboxMu.RLock()
	ib := o.m.inboxes[meta.Owner]
	o.m.inboxMu.RUnlock()
	if ib != nil {
		ib.takeTerminal(meta.ID)
	}
	if err := o.MarkAnnounced(context.WithoutCancel(ctx), meta.ID); err != nil {
		o.m.log.Warn("bgtask: a task's end given as a tool result not marked announced", "task_id", meta.ID, "err", err)
		return
	}
	meta.Announced = true
}
