package main

import (
	"context"
	"fmt"

	"github.com/bgtask/bgtask/bgtype"

	"github.com/bgtask/bgtask"
)

// benchOwner owns the tasks of the single-owner rows.
const benchOwner = "bench-owner"

// withManager runs f with a new Manager (default options plus opts) and
// shuts it down afterwards, cancelling what is still running.
func withManager(ctx context.Context, f func(m *bgtask.Manager) error, opts ...bgtask.Option) error {
	m, err := bgtask.New(opts...)
	if err != nil {
		return err
	}
	err = f(m)
	if serr := m.Shutdown(context.WithoutCancel(ctx)); err == nil && serr != nil {
		err = fmt.Errorf("shutdown: %w", serr)
	}
	return err
}

// awaitKind waits on ib until n events of kind have arrived, reusing buf,
// and returns buf. Other events are skipped.
func awaitKind(ctx context.Context, ib *bgtask.Inbox, kind bgtype.EventKind, n int, buf []bgtype.Event) ([]bgtype.Event, error) {
	for got := 0; got < n; {
		if err := ib.Wait(ctx); err != nil {
			return buf, err
		}
		buf = ib.AppendDrain(buf[:0])
		for i := range buf {
			if buf[i].Kind == kind {
				got++
			}
		}
	}
	return buf, nil
}

// parkedTask blocks until its task is cancelled.
func parkedTask(ctx context.Context, _ *bgtask.Task) (any, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// answer is a task that completes at once with the result 42.
func answer(context.Context, *bgtask.Task) (any, error) { return 42, nil }
