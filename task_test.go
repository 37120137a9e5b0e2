package bgtask

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/bgtask/bgtask/bgtype"
)

func TestManagerEventsRapidEmits(t *testing.T) {
	m := newTestManager(t)
	o := m.Owner("thread-1")
	const n = 100
	id, err := o.Spawn(t.Context(), func(ctx context.Context, tk *Task) (any, error) {
		for i := range n {
			if err := tk.Emit("tick", map[string]int{"i": i}); err != nil {
				return nil, err
			}
		}
		return map[string]string{"final": "answer"}, nil
	}, WithWake(bgtype.WakeOnActivity))
	if err != nil {
		t.Fatal(err)
	}
	got := waitTask(t, o, id)
	if got.Status != bgtype.StatusCompleted || string(got.Result) != `{"final":"answer"}` {
		t.Fatalf("events changed the result: %+v", got)
	}
	evs := drainOwner(t, o)
	if len(evs) != n+1 {
		t.Fatalf("%d events, want %d", len(evs), n+1)
	}
	for i, ev := range evs[:n] {
		want := fmt.Sprintf(`{"i":%d}`, i)
		if ev.Kind != bgtype.EventCustom || ev.EventType != "tick" || ev.TaskID != id || string(ev.Payload) != want {
			t.Fatalf("event %d = %+v (payload %s), want tick %s", i, ev, ev.Payload, want)
		}
	}
	last := evs[n]
	if last.Kind != bgtype.EventCompleted || last.TaskID != id || string(last.Result) != `{"final":"answer"}` {
		t.Fatalf("last event %+v", last)
	}
	if evs := drainOwner(t, o); len(evs) != 0 {
		t.Fatalf("second drain: %v", evs)
	}
	shutdownManager(t, m)
}

func TestManagerEventsManyTasksShareInbox(t *testing.T) {
	m := newTestManager(t)
	o := m.Owner("thread-1")
	const tasks, emits = 8, 20
	start := make(chan struct{})
	ids := map[string]int{}
	for k := range tasks {
		id, err := o.Spawn(t.Context(), func(ctx context.Context, tk *Task) (any, error) {
			<-start
			for i := range emits {
				if err := tk.Emit("step", []int{k, i}); err != nil {
					return nil, err
				}
			}
			if k%2 == 1 {
				return nil, fmt.Errorf("task %d failed", k)
			}
			return k, nil
		}, WithWake(bgtype.WakeOnActivity))
		if err != nil {
			t.Fatal(err)
		}
		ids[id] = k
	}
	close(start)
	for id := range ids {
		waitTask(t, o, id)
	}
	next := map[string]int{}
	ended := map[string]bool{}
	evs := drainOwner(t, o)
	if len(evs) != tasks*(emits+1) {
		t.Fatalf("%d events, want %d", len(evs), tasks*(emits+1))
	}
	for _, ev := range evs {
		k, ok := ids[ev.TaskID]
		if !ok {
			t.Fatalf("event for unknown task %q", ev.TaskID)
		}
		if ended[ev.TaskID] {
			t.Fatalf("event %+v after the terminal event of its task", ev)
		}
		switch ev.Kind {
		case bgtype.EventCustom:
			want := fmt.Sprintf("[%d,%d]", k, next[ev.TaskID])
			if string(ev.Payload) != want {
				t.Fatalf("task %d: payload %s, want %s", k, ev.Payload, want)
			}
			next[ev.TaskID]++
		case bgtype.EventCompleted, bgtype.EventFailed:
			if next[ev.TaskID] != emits {
				t.Fatalf("task %d: terminal after %d custom events, want %d", k, next[ev.TaskID], emits)
			}
			wantKind := bgtype.EventCompleted
			if k%2 == 1 {
				wantKind = bgtype.EventFailed
			}
			if ev.Kind != wantKind {
				t.Fatalf("task %d: %q, want %q", k, ev.Kind, wantKind)
			}
			ended[ev.TaskID] = true
		default:
			t.Fatalf("unexpected event %+v", ev)
		}
	}
	if len(ended) != tasks {
		t.Fatalf("%d terminal events, want %d", len(ended), tasks)
	}
	shutdownManager(t, m)
}

func TestManagerEmitErrors(t *testing.T) {
	m := newTestManager(t)
	o := m.Owner("thread-1")
	type result struct {
		empty, fn, ch, ok error
	}
	res := make(chan result, 1)
	handle := make(chan *Task, 1)
	id, err := o.Spawn(t.Context(), func(ctx context.Context, tk *Task) (any, error) {
		handle <- tk
		payload := map[string]int{"n": 1}
		r := result{
			empty: tk.Emit("", 1),
			fn:    tk.Emit("bad", func() {}),
			ch:    tk.Emit("bad", map[string]any{"c": make(chan int)}),
			ok:    tk.Emit("good", payload),
		}
		payload["n"] = 2 // encoded at Emit: the event keeps 1
		res <- r
		return nil, nil
	}, WithWake(bgtype.WakeOnActivity))
	if err != nil {
		t.Fatal(err)
	}
	r := <-res
	if !errors.Is(r.empty, ErrInvalidArgument) {
		t.Errorf("Emit(\"\") = %v, want ErrInvalidArgument", r.empty)
	}
	if !errors.Is(r.fn, ErrInvalidArgument) {
		t.Errorf("Emit(func) = %v, want ErrInvalidArgument", r.fn)
	}
	if !errors.Is(r.ch, ErrInvalidArgument) {
		t.Errorf("Emit(chan) = %v, want ErrInvalidArgument", r.ch)
	}
	if r.ok != nil {
		t.Errorf("Emit(good) = %v", r.ok)
	}
	waitTask(t, o, id)
	tk := <-handle
	if err := tk.Emit("late", 1); !errors.Is(err, errTaskEnded) {
		t.Errorf("Emit after return = %v, want ErrTerminal", err)
	}
	if err := tk.Emit("", 1); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("Emit(\"\") after return = %v, want ErrInvalidArgument", err)
	}
	evs := drainOwner(t, o)
	if len(evs) != 2 || evs[0].EventType != "good" || string(evs[0].Payload) != `{"n":1}` || evs[1].Kind != bgtype.EventCompleted {
		t.Fatalf("events %+v, want good {\"n\":1} then completed", evs)
	}
	shutdownManager(t, m)
}

func TestManagerEmitAfterCancelDelivers(t *testing.T) {
	m := newTestManager(t)
	o := m.Owner("thread-1")
	started := make(chan struct{})
	emitErr := make(chan error, 1)
	id, err := o.Spawn(t.Context(), func(ctx context.Context, tk *Task) (any, error) {
		if err := tk.Emit("ready", map[string]int{"port": 8080}); err != nil {
			return nil, err
		}
		close(started)
		<-ctx.Done()
		emitErr <- tk.Emit("final_words", "bye")
		return nil, context.Cause(ctx)
	}, WithWake(bgtype.WakeOnActivity))
	if err != nil {
		t.Fatal(err)
	}
	<-started
	ib, _ := o.Inbox()
	if err := ib.Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	if evs := ib.Drain(); len(evs) != 1 || evs[0].EventType != "ready" || string(evs[0].Payload) != `{"port":8080}` {
		t.Fatalf("before cancel: %+v", evs)
	}
	if got, _ := o.Get(t.Context(), id); got.Status != bgtype.StatusRunning {
		t.Fatalf("status %q before cancel", got.Status)
	}
	if n, err := o.Cancel(t.Context(), id); n != 1 || err != nil {
		t.Fatalf("Cancel = %d, %v", n, err)
	}
	if err := <-emitErr; err != nil {
		t.Fatalf("Emit after cancel: %v", err)
	}
	if got := waitTask(t, o, id); got.Status != bgtype.StatusCanceled {
		t.Fatalf("status %q, want cancelled", got.Status)
	}
	evs := ib.Drain()
	if len(evs) != 2 || evs[0].EventType != "final_words" || string(evs[0].Payload) != `"bye"` ||
		evs[1].Kind != bgtype.EventCanceled || evs[1].TaskID != id {
		t.Fatalf("after cancel: %+v", evs)
	}
	b, err := json.Marshal(evs[1])
	if err != nil || string(b) != `{"kind":"cancelled","task_id":"`+id+`"}` {
		t.Fatalf("cancelled event JSON %s, %v", b, err)
	}
	shutdownManager(t, m)
}
