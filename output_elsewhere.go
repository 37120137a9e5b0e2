// A task's output is kept in the memory of the instance that runs it: a
// read on another instance of a fleet is carried there through the store
// (store.OutputCarrier) and answered by that instance's Manager.

package bgtask

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"
)

// outputWaitMax bounds one carried wait for new output: the instance that
// runs the task waits at most this long per read (the reader's ctx is not
// carried there), and a longer WaitOutput asks again.
const outputWaitMax = 30 * time.Second

// outputWire is an Output as it travels back from the instance that runs
// the task.
type outputWire struct {
	Text       string `json:"text"`
	Offset     int64  `json:"offset"`
	NextOffset int64  `json:"next_offset"`
	Dropped    int64  `json:"dropped"`
	Size       int64  `json:"size"`
	Done       bool   `json:"done"`
}

// outputCarrier returns the store's OutputCarrier when meta's task is one
// whose output another instance keeps: its record names an instance that
// is not this one. A record that names none was never run anywhere.
func (m *Manager) outputCarrier(meta *bgtype.TaskMeta) (store.OutputCarrier, bool) {
	if meta.Instance == "" || meta.Instance == m.cfg.instance {
		return nil, false
	}
	oc, ok := m.store.(store.OutputCarrier)
	return oc, ok
}

// outputRequested answers req, a read of task id's output asked by owner
// on another instance, as that owner's ReadOutput (or TailOutput, after
// WaitOutput when req.Wait is positive) would here, and returns the answer
// to carry back. It never carries the read on
// (store.OutputHandler.OutputRequested).
func (m *Manager) outputRequested(ctx context.Context, owner, id string, req store.OutputRequest) store.Delivery {
	o := m.Owner(owner)
	if req.Wait > 0 {
		wctx, cancel := context.WithTimeout(ctx, min(req.Wait, outputWaitMax))
		err := o.waitOutput(wctx, id, req.From, false)
		cancel()
		if err != nil && (ctx.Err() != nil || wctx.Err() == nil) {
			return deliveryOf(err) // not the end of this wait: the reader gets it as here
		}
	}
	var out Output
	var err error
	if req.Tail {
		out, err = o.tailOutput(ctx, id, req.Limit, false)
	} else {
		out, err = o.readOutput(ctx, id, req.From, req.Limit, false)
	}
	if err != nil {
		return deliveryOf(err)
	}
	body, err := json.Marshal(outputWire(out))
	if err != nil {
		return deliveryOf(err)
	}
	return store.Delivery{Text: string(body)}
}

// readElsewhere carries req to the instance that keeps meta's task's
// output and returns the piece it read there, or the error it gave, as a
// read there returns it. An instance that is gone is an error matching
// ErrNotLive: its output is lost, and an empty read would look complete.
func (m *Manager) readElsewhere(ctx context.Context, oc store.OutputCarrier, owner string, meta *bgtype.TaskMeta, req store.OutputRequest) (Output, error) {
	d, err := oc.CarryOutput(ctx, owner, meta.ID, req)
	switch {
	case err != nil && ctx.Err() != nil:
		return Output{}, context.Cause(ctx)
	case err != nil:
		return Output{}, fmt.Errorf("bgtask: read the output of %s on instance %q: %w", meta.ID, meta.Instance, err)
	case d.Code == store.DeliveryGone:
		instance := cmp.Or(d.Text, meta.Instance)
		return Output{}, &folded{fmt.Sprintf("bgtask: task %s: its instance %q is gone; the output it kept in memory is lost", meta.ID, instance), []error{ErrNotLive}}
	case d.Code == codeClosed:
		return Output{}, &folded{fmt.Sprintf("%s: task %s: its instance %q is shutting down", ErrClosed, meta.ID, meta.Instance), []error{ErrClosed}}
	case d.Code != "":
		return Output{}, deliveryError(*meta, d)
	}
	var w outputWire
	if err := json.Unmarshal([]byte(d.Text), &w); err != nil {
		return Output{}, fmt.Errorf("bgtask: read the output of %s on instance %q: %w", meta.ID, meta.Instance, err)
	}
	return Output(w), nil
}

// waitElsewhereOutput waits until meta's task, whose output another
// instance keeps, has written past from or writes no more: each carried
// read waits there at most outputWaitMax (the running instance wakes it at
// the first write or the end), and is asked again until ctx ends.
func (m *Manager) waitElsewhereOutput(ctx context.Context, oc store.OutputCarrier, owner string, meta *bgtype.TaskMeta, from int64) error {
	for {
		wait := outputWaitMax
		if dl, ok := ctx.Deadline(); ok {
			wait = min(wait, time.Until(dl))
		}
		if wait <= 0 {
			<-ctx.Done()
			return context.Cause(ctx)
		}
		out, err := m.readElsewhere(ctx, oc, owner, meta, store.OutputRequest{From: from, Wait: wait})
		switch {
		case err != nil:
			return err
		case out.Size > from || out.Done:
			return nil
		}
		if err := ctx.Err(); err != nil {
			return context.Cause(ctx)
		}
	}
}
