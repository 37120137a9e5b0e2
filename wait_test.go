package bgtask

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bgtask/bgtask/bgtype"
)

func TestManagerWaitHonorsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newTestManager(t)
		o := m.Owner("thread-1")
		id, p := spawnProbe(t, t.Context(), o)
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		start := time.Now()
		if _, err := o.Wait(ctx, id); !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != 5*time.Second {
			t.Fatalf("Wait = %v after %v; want DeadlineExceeded after 5s", err, time.Since(start))
		}
		if _, err := m.Wait(ctx, id); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Manager.Wait with an ended ctx: %v", err)
		}
		if err := p.ctxErr(t); err != nil {
			t.Fatalf("a Wait timeout cancelled the task: %v", err)
		}
		close(p.release)
		if got := waitTask(t, o, id); got.Status != bgtype.StatusCompleted || string(got.Result) != `"released"` {
			t.Fatalf("after release: %+v", got)
		}
		shutdownManager(t, m)
	})
}
