package bgtask

import (
	"context"
	"io"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/internal/memstore"
)

// writeAll is a task that writes pieces to its output, in order, and
// returns "ok".
func writeAll(pieces ...string) Func {
	return func(_ context.Context, tk *Task) (any, error) {
		for _, p := range pieces {
			if _, err := io.WriteString(tk.Output(), p); err != nil {
				return nil, err
			}
		}
		return "ok", nil
	}
}

// endEvent waits on ib for the terminal event of task id and returns it.
func endEvent(t *testing.T, ib *Inbox, id string) bgtype.Event {
	t.Helper()
	for {
		if err := ib.Wait(t.Context()); err != nil {
			t.Fatalf("Inbox.Wait: %v", err)
		}
		for _, ev := range ib.Drain() {
			if ev.TaskID == id && ev.Kind.IsTerminal() {
				return ev
			}
		}
	}
}

// A task's terminal record keeps how many bytes it wrote to its output in
// all (OutputBytes), and its end's event says it: 11 for a task that wrote
// 11 bytes, 0 for one that wrote none or only an empty piece (its buffer
// is made, empty). With the in-memory store (whose record the Manager
// shares) and with another Store (the Task keeps a private copy).
func TestOutputBytesOnTerminalRecord(t *testing.T) {
	t.Parallel()
	stores := []struct {
		name string
		opts func() []Option
	}{
		{"in-memory store", func() []Option { return nil }},
		{"another store", func() []Option { return []Option{WithStore(&countingStore{Store: memstore.New()})} }},
	}
	writes := []struct {
		name   string
		pieces []string
		want   int64
	}{
		{"11 bytes", []string{"hello ", "world"}, 11},
		{"none", nil, 0},
		{"an empty piece", []string{""}, 0},
	}
	for _, st := range stores {
		for _, w := range writes {
			t.Run(st.name+", wrote "+w.name, func(t *testing.T) {
				t.Parallel()
				m := newTestManager(t, st.opts()...)
				o := m.Owner("alice")
				ib, err := o.Inbox()
				if err != nil {
					t.Fatal(err)
				}
				id, err := o.Spawn(t.Context(), writeAll(w.pieces...))
				if err != nil {
					t.Fatal(err)
				}
				ev := endEvent(t, ib, id)
				if ev.Kind != bgtype.EventCompleted || ev.OutputBytes != w.want {
					t.Fatalf("end event: %s with output_bytes %d, want completed with %d", ev.Kind, ev.OutputBytes, w.want)
				}
				if got := getTask(t, o, id); got.Status != bgtype.StatusCompleted || got.OutputBytes != w.want {
					t.Fatalf("record: %s with OutputBytes %d, want completed with %d", got.Status, got.OutputBytes, w.want)
				}
				shutdownManager(t, m)
			})
		}
	}
}

// A task that ends in the foreground (Owner.Foreground) keeps its output
// size on its record too, and so does one that fails.
func TestOutputBytesForegroundAndFailed(t *testing.T) {
	t.Parallel()
	m := newTestManager(t)
	o := m.Owner("alice")
	res, err := o.Foreground(t.Context(), time.Hour, writeAll("hello world"))
	if err != nil || res.Promoted {
		t.Fatalf("Foreground = %+v, %v; want its end", res, err)
	}
	if got := getTask(t, o, res.TaskID); got.Status != bgtype.StatusCompleted || got.OutputBytes != 11 {
		t.Fatalf("foreground record: %s with OutputBytes %d, want completed with 11", got.Status, got.OutputBytes)
	}
	ib, err := o.Inbox()
	if err != nil {
		t.Fatal(err)
	}
	id, err := o.Spawn(t.Context(), func(_ context.Context, tk *Task) (any, error) {
		_, _ = io.WriteString(tk.Output(), "partial")
		return nil, io.ErrUnexpectedEOF
	})
	if err != nil {
		t.Fatal(err)
	}
	if ev := endEvent(t, ib, id); ev.Kind != bgtype.EventFailed || ev.OutputBytes != 7 {
		t.Fatalf("end event: %s with output_bytes %d, want failed with 7", ev.Kind, ev.OutputBytes)
	}
	if got := getTask(t, o, id); got.Status != bgtype.StatusFailed || got.OutputBytes != 7 {
		t.Fatalf("failed record: %s with OutputBytes %d, want failed with 7", got.Status, got.OutputBytes)
	}
	shutdownManager(t, m)
}

// A task that Stop cuts keeps the size it wrote before the cut on its
// interrupted record; its end's event says it.
func TestOutputBytesOfACutTask(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		m := newTestManager(t)
		id := spawnFor(t, m, "a", func(ctx context.Context, tk *Task) (any, error) {
			if _, err := io.WriteString(tk.Output(), "abc"); err != nil {
				return nil, err
			}
			<-ctx.Done()
			return "late", nil
		})
		synctest.Wait()
		if _, ok := stopWithin5s(t, m).(*ShutdownError); !ok {
			t.Fatal("Stop cut nothing")
		}
		if got := getTask(t, m, id); got.Status != bgtype.StatusInterrupted || got.OutputBytes != 3 {
			t.Fatalf("record: %s with OutputBytes %d, want interrupted with 3", got.Status, got.OutputBytes)
		}
		evs := drainOwner(t, m.Owner("a"))
		if len(evs) != 1 || evs[0].Kind != bgtype.EventInterrupted || evs[0].OutputBytes != 3 {
			t.Fatalf("events: %+v, want interrupted with output_bytes 3", evs)
		}
	})
}
