package agent

import (
	"context"
	"fmt"
	"testing"

	"github.com/bgtask/bgtask"
)

func TestIsModelMistake(t *testing.T) {
	m := newTestManager(t)
	o := m.Owner("thread-1")
	ctx := context.Background()
	_, badArgs := toolNamed(t, o, "get_task").Call(ctx, []byte(`{"task_id":1}`))
	_, unknown := toolNamed(t, o, "get_task").Call(ctx, []byte(`{"task_id":"task_0190d5f4c5a87000a000000000000001"}`))
	_, noCurrent := toolNamed(t, o, "cancel_task").Call(ctx, []byte(`{"target":{"relation":"self","name":null},"reason":null}`))
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"bad arguments", badArgs, true},
		{"unknown task", unknown, true},
		{"no current task", noCurrent, true},
		{"wrapped", fmt.Errorf("host: %w", badArgs), true},
		{"manager closed", fmt.Errorf("list_tasks: %w", bgtask.ErrClosed), false},
		{"ctx ended", context.Canceled, false},
		{"nil", nil, false},
	} {
		if got := IsModelMistake(tc.err); got != tc.want {
			t.Errorf("%s: IsModelMistake(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
	if badArgs == nil || unknown == nil || noCurrent == nil {
		t.Fatalf("errors: %v, %v, %v; want three", badArgs, unknown, noCurrent)
	}
}
