package bgtask

import (
	"context"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestSmoke(t *testing.T) {
	m, err := New()
	if err != nil {
		t.Fatal(err)
	}
	o := m.Owner("thread-1")
	id, err := o.Spawn(t.Context(), func(ctx context.Context, tk *Task) (any, error) {
		if err := tk.Emit("progress", map[string]int{"p": 1}); err != nil {
			return nil, err
		}
		return map[string]int{"answer": 42}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	meta, err := o.Wait(t.Context(), id)
	if err != nil || meta.Status != StatusCompleted || string(meta.Result) != `{"answer":42}` {
		t.Fatalf("%+v %v", meta, err)
	}
	ib, _ := o.Inbox()
	evs := ib.Drain()
	if len(evs) != 2 {
		t.Fatalf("%v", evs)
	}
	for _, e := range evs {
		b, _ := e.MarshalJSON()
		t.Log(string(b))
	}
	if err := m.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
}
