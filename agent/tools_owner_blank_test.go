package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/bgtask/bgtask"

	"github.com/bgtask/bgtask/bgtype"
)

// TestOwnerBlankRefusedEverywhere: every call of an Owner view, every tool,
// and every Manager call that takes an owner returns ErrInvalidArgument (blank owner) for a
// blank owner, before anything else (ErrClosed included), and touches no
// other owner's task. Owner("") used to cancel any owner's task.
func TestOwnerBlankRefusedEverywhere(t *testing.T) {
	for _, closed := range []bool{false, true} {
		t.Run(fmt.Sprint("closed=", closed), func(t *testing.T) {
			m := newTestManager(t)
			theirs, tp := spawnProbe(t, runCtx(t.Context(), "run-1"), m.Owner("thread-2"), bgtask.WithName("job"))
			if closed {
				shutdownManager(t, m)
			}
			fn := func(context.Context, *bgtask.Task) (any, error) { return nil, nil }
			ctx := runCtx(t.Context(), "run-1")
			for _, blank := range blankOwners {
				o := m.Owner(blank)
				calls := []struct {
					name string
					call func() error
				}{
					{"Owner.Spawn", func() error { _, err := o.Spawn(ctx, fn); return err }},
					{"Owner.SpawnAgent", func() error { _, err := o.SpawnAgent(ctx, fn); return err }},
					{"Owner.Get", func() error { _, err := o.Get(ctx, theirs); return err }},
					{"Owner.List", func() error { _, err := listed(o.List(ctx)); return err }},
					{"Owner.Cancel", func() error { _, err := o.Cancel(ctx, theirs); return err }},
					{"Owner.CancelTree", func() error { _, err := o.CancelTree(ctx, theirs); return err }},
					{"Owner.CancelAll", func() error { _, err := o.CancelAll(); return err }},
					{"Owner.CancelRun", func() error { _, err := o.CancelRun("run-1"); return err }},
					{"Owner.Send", func() error { _, err := o.Send(ctx, theirs, bgtype.Message{Content: "hi"}); return err }},
					{"Owner.Wait", func() error { _, err := o.Wait(ctx, theirs); return err }},
					{"Owner.Inbox", func() error { _, err := o.Inbox(); return err }},
					{"Owner.Messages", func() error { _, err := o.Messages(ctx, theirs); return err }},
					{"Owner.CancelCurrent", func() error { _, _, err := o.CancelCurrent(ctx); return err }},
					{"Manager.Inbox", func() error { _, err := m.Inbox(blank); return err }},
					{"Manager.BindInbox", func() error { _, err := m.BindInbox(blank, bgtask.NewInbox(bgtask.InboxConfig{})); return err }},
					{"Owner.CancelAll", func() error { _, err := m.Owner(blank).CancelAll(); return err }},
					{"Manager.CancelRun", func() error { _, err := m.CancelRun(blank, "run-1"); return err }},
					{"Manager.Send", func() error { _, err := m.Send(ctx, blank, theirs, bgtype.Message{Content: "hi"}); return err }},
					{"Manager.Restore", func() error { _, err := m.Restore(ctx, blank); return err }},
				}
				args := map[string]string{
					"list_tasks":   `{}`,
					"get_task":     `{"task_id":"` + theirs + `"}`,
					"cancel_task":  `{"target":{"relation":"child","name":"` + theirs + `"}}`,
					"send_message": `{"to":{"relation":"child","name":"job"},"message":"hi"}`,
					"wait_task":    `{"task_id":"` + theirs + `","timeout_seconds":1}`,
				}
				for _, tool := range Tools(o) {
					calls = append(calls, struct {
						name string
						call func() error
					}{"tool " + tool.Name, func() error { _, err := tool.Call(ctx, json.RawMessage(args[tool.Name])); return err }})
				}
				if !closed { // NewPlugin checks ErrClosed first
					calls = append(calls, struct {
						name string
						call func() error
					}{"NewPlugin", func() error { _, err := NewPlugin(m, blank, Config{}); return err }},
						struct {
							name string
							call func() error
						}{"Manager.NewReceiver", func() error { _, err := m.NewReceiver(blank, bgtask.ReceiverConfig{}); return err }})
				}
				for _, c := range calls {
					if err := c.call(); !errors.Is(err, bgtask.ErrInvalidArgument) || !errors.Is(err, bgtype.ErrInvalidOwner) || err.Error() != "bgtask: owner id is empty" {
						t.Errorf("%s with owner %q: %v, want the blank-owner error (ErrInvalidArgument)", c.name, blank, err)
					}
				}
			}
			if !closed { // Shutdown has cancelled it otherwise
				if err := tp.ctxErr(t); err != nil {
					t.Fatalf("thread-2's task was cancelled: %v", err)
				}
				close(tp.release)
				if got := waitTask(t, m.Owner("thread-2"), theirs); got.Status != bgtype.StatusCompleted {
					t.Fatalf("thread-2's task %s, want completed", got.Status)
				}
			}
		})
	}
}
