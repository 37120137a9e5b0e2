package bgtask

import (
	"context"
	"errors"
	"testing"

	"github.com/bgtask/bgtask/bgtype"
)

// WaitSettled returns when the task asks for input, at once while the
// request is open, not for a request answered before it looked, and with
// the final record when the task ends; another owner's task is not found.
func TestOwnerWaitSettled(t *testing.T) {
	m := newTestManager(t)
	o := m.Owner("thread-1")
	asked := make(chan struct{})
	id, err := o.Spawn(t.Context(), func(ctx context.Context, tk *Task) (any, error) {
		msg, err := tk.RequestInput(ctx, "which region?")
		if err != nil {
			return nil, err
		}
		close(asked)
		msg2, err := tk.RequestInput(ctx, "which zone?")
		if err != nil {
			return nil, err
		}
		return msg.Content + "/" + msg2.Content, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	answer := func(meta bgtype.TaskMeta, content string) {
		t.Helper()
		if _, err := o.Send(t.Context(), id, bgtype.Message{Content: content, InReplyTo: meta.Input.ID}); err != nil {
			t.Fatal(err)
		}
	}
	first, err := o.WaitSettled(t.Context(), id)
	if err != nil || first.Status != bgtype.StatusAwaitingInput || first.Input == nil || first.Input.Prompt != "which region?" {
		t.Fatalf("WaitSettled = %+v, %v; want awaiting_input with the first prompt", first, err)
	}
	again, err := o.WaitSettled(t.Context(), id)
	if err != nil || again.Input == nil || again.Input.ID != first.Input.ID {
		t.Fatalf("WaitSettled while open = %+v, %v; want the same request", again, err)
	}
	answer(first, "eu")
	<-asked
	second, err := o.WaitSettled(t.Context(), id)
	if err != nil || second.Status != bgtype.StatusAwaitingInput || second.Input == nil || second.Input.Prompt != "which zone?" || second.Input.ID == first.Input.ID {
		t.Fatalf("WaitSettled after the answer = %+v, %v; want the second request", second, err)
	}
	answer(second, "b")
	end, err := o.WaitSettled(t.Context(), id)
	if err != nil || end.Status != bgtype.StatusCompleted || string(end.Result) != `"eu/b"` {
		t.Fatalf("WaitSettled at the end = %+v, %v; want completed \"eu/b\"", end, err)
	}
	if _, err := m.Owner("thread-2").WaitSettled(t.Context(), id); !errors.Is(err, ErrNotFound) {
		t.Errorf("another owner's WaitSettled: %v, want ErrNotFound", err)
	}
	if _, err := m.Owner(" ").WaitSettled(t.Context(), id); !errors.Is(err, bgtype.ErrInvalidOwner) {
		t.Errorf("blank owner's WaitSettled: %v, want ErrInvalidArgument (blank owner)", err)
	}
}

func TestMaxResultBytes(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []Option
		want int
	}{
		{"default", nil, defaultMaxResultBytes},
		{"zero is the default", []Option{WithCaps(Caps{MaxResultBytes: 0})}, defaultMaxResultBytes},
		{"set", []Option{WithCaps(Caps{MaxResultBytes: 1000})}, 1000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := newTestManager(t, tc.opts...).MaxResultBytes(); got != tc.want {
				t.Errorf("MaxResultBytes() = %d, want %d", got, tc.want)
			}
		})
	}
}
