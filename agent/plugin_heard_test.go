package agent

import (
	"context"
	"errors"
	"iter"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/internal/memstore"
)

// listFails is a durable store whose List fails while fail is set.
type listFails struct {
	*durableMem
	fail atomic.Bool
}

func (s *listFails) List(ctx context.Context, owner string, statuses ...bgtype.Status) iter.Seq2[bgtype.TaskMeta, error] {
	if s.fail.Load() {
		return func(yield func(bgtype.TaskMeta, error) bool) { yield(bgtype.TaskMeta{}, errors.New("db down")) }
	}
	return s.durableMem.List(ctx, owner, statuses...)
}

func (s *listFails) ListTagged(ctx context.Context, owner, tag string, statuses ...bgtype.Status) iter.Seq2[bgtype.TaskMeta, error] {
	if s.fail.Load() {
		return s.List(ctx, owner, statuses...)
	}
	return s.durableMem.ListTagged(ctx, owner, tag, statuses...)
}

// BeforeInference keeps the README's promise with an ended request
// context: it delivers and renders; and when it fails after taking the
// events (the prompt view cannot be read), nothing is lost or marked: the
// next BeforeInference hands them out (issue 30, item 2).
func TestBeforeInferenceLosesNothing(t *testing.T) {
	ds := &listFails{durableMem: &durableMem{Store: memstore.New()}}
	m := newTestManager(t, bgtask.WithStore(ds))
	p, err := NewPlugin(m, "thread-1", Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.RunStart(t.Context(), bgtask.RunInfo{RunID: "run-1"}); err != nil {
		t.Fatal(err)
	}
	ids := finishTasks(t, m, "thread-1", nil)
	spawnProbe(t, t.Context(), p.Owner()) // a live task: the prompt view is read
	ds.fail.Store(true)
	if msgs, err := p.BeforeInference(t.Context()); err == nil || len(msgs) != 0 {
		t.Fatalf("BeforeInference with the store's List failing = %d messages, %v; want none and the error", len(msgs), err)
	}
	ds.fail.Store(false)
	ended, cancel := context.WithCancel(t.Context())
	cancel()
	msgs, err := p.BeforeInference(ended)
	if err != nil || !slices.Equal(eventIDs(msgs), ids) {
		t.Fatalf("BeforeInference with an ended context = %q, %v; want %q", eventIDs(msgs), err, ids)
	}
	if msgs[len(msgs)-1].Content == "" || !msgs[len(msgs)-1].Ephemeral {
		t.Fatalf("no prompt view after the events: %+v", msgs[len(msgs)-1])
	}
	if got := getTask(t, m, ids[0]); got.Announced {
		t.Fatal("marked before the model answered")
	}
	if err := p.RunEnd(ended, bgtask.RunOutcome{RunID: "run-1"}); err != nil {
		t.Fatal(err)
	}
	if got := getTask(t, m, ids[0]); !got.Announced {
		t.Fatal("not marked after the run the model answered")
	}
}
