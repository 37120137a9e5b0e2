package bgtask

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/bgtask/bgtask/internal/memstore"

	"github.com/bgtask/bgtask/bgtype"
)

// TestTaskPhaseMoves: exactly the documented moves are allowed.
func TestTaskPhaseMoves(t *testing.T) {
	allowed := map[[2]taskPhase]bool{
		{phaseNew, phaseAdmitted}:     true,
		{phaseNew, phaseWaiting}:      true,
		{phaseAdmitted, phaseRunning}: true,
		{phaseAdmitted, phaseEnding}:  true,
		{phaseWaiting, phaseAdmitted}: true,
		{phaseWaiting, phaseQueued}:   true,
		{phaseWaiting, phaseDropped}:  true,
		{phaseWaiting, phaseEnding}:   true,
		{phaseQueued, phaseRunning}:   true,
		{phaseQueued, phaseDropped}:   true,
		{phaseRunning, phaseEnding}:   true,
		{phaseDropped, phaseEnding}:   true,
		{phaseEnding, phaseGone}:      true,
	}
	for from := phaseNew; from <= phaseGone+1; from++ {
		for to := phaseNew; to <= phaseGone+1; to++ {
			if got, want := from.canMove(to), allowed[[2]taskPhase{from, to}]; got != want {
				t.Errorf("%s -> %s allowed = %v, want %v", from, to, got, want)
			}
		}
	}
	live := []taskPhase{phaseAdmitted, phaseWaiting, phaseQueued, phaseRunning, phaseDropped}
	slot := []taskPhase{phaseAdmitted, phaseRunning}
	for p := phaseNew; p <= phaseGone; p++ {
		if got, want := p.live(), slices.Contains(live, p); got != want {
			t.Errorf("%s.live() = %v, want %v", p, got, want)
		}
		if got, want := p.holdsSlot(), slices.Contains(slot, p); got != want {
			t.Errorf("%s.holdsSlot() = %v, want %v", p, got, want)
		}
	}
	if got := taskPhase(99).String(); got != "phase(99)" {
		t.Errorf("String of an unknown phase = %q", got)
	}
}

// TestTaskPhaseMovePanics: a move the table forbids is a bug and panics
// with the task and both phases.
func TestTaskPhaseMovePanics(t *testing.T) {
	m := newTestManager(t)
	tk := &Task{m: m, rec: &memstore.Rec{ID: "task_x"}, phase: phaseRunning}
	defer func() {
		if r := recover(); r != "bgtask: task task_x: phase running cannot move to queued" {
			t.Fatalf("recovered %v", r)
		}
	}()
	tk.move(phaseQueued)
}

// phaseLog records every task's phases, in order.
type phaseLog struct {
	mu    sync.Mutex
	moves map[string][]taskPhase
}

func watchPhases(m *Manager) *phaseLog {
	l := &phaseLog{moves: make(map[string][]taskPhase)}
	m.phaseHook = func(t *Task, from, to taskPhase) {
		l.mu.Lock()
		defer l.mu.Unlock()
		if len(l.moves[t.rec.ID]) == 0 {
			l.moves[t.rec.ID] = []taskPhase{from}
		}
		l.moves[t.rec.ID] = append(l.moves[t.rec.ID], to)
	}
	return l
}

func (l *phaseLog) of(id string) []taskPhase {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.moves[id])
}

// TestTaskPhasePaths: real tasks go through the phases the table
// documents: one that runs, one queued then started, one cancelled while
// queued, and one whose first commit fails.
func TestTaskPhasePaths(t *testing.T) {
	st := newFailingStore()
	m := newTestManager(t, WithStore(st), WithLimits(Limits{MaxConcurrent: 1, QueueWhenFull: true}))
	phases := watchPhases(m)
	o := m.Owner("a")
	release := make(chan struct{})
	first, err := o.Spawn(t.Context(), func(ctx context.Context, _ *Task) (any, error) {
		<-release
		return "first", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	second, err := o.Spawn(t.Context(), func(context.Context, *Task) (any, error) { return "second", nil })
	if err != nil {
		t.Fatal(err)
	}
	dropped, err := o.Spawn(t.Context(), func(context.Context, *Task) (any, error) { return "never", nil })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.Cancel(t.Context(), dropped); err != nil {
		t.Fatal(err)
	}
	if got := waitTask(t, o, dropped); got.Status != bgtype.StatusCanceled {
		t.Fatalf("dropped ended %s", got.Status)
	}
	st.fail(1, bgtype.StatusQueued)
	if _, err := o.Spawn(t.Context(), func(context.Context, *Task) (any, error) { return nil, nil }); err == nil {
		t.Fatal("spawn with a failing commit succeeded")
	}
	close(release)
	if got := waitTask(t, o, second); got.Status != bgtype.StatusCompleted {
		t.Fatalf("second ended %s", got.Status)
	}
	if got := waitTask(t, o, first); got.Status != bgtype.StatusCompleted {
		t.Fatalf("first ended %s", got.Status)
	}
	var abandoned string
	phases.mu.Lock()
	for id := range phases.moves {
		if id != first && id != second && id != dropped {
			abandoned = id
		}
	}
	phases.mu.Unlock()
	tests := []struct {
		name string
		id   string
		want []taskPhase
	}{
		{"runs", first, []taskPhase{phaseNew, phaseAdmitted, phaseRunning, phaseEnding, phaseGone}},
		{"queued, then started", second, []taskPhase{phaseNew, phaseWaiting, phaseQueued, phaseRunning, phaseEnding, phaseGone}},
		{"cancelled while queued", dropped, []taskPhase{phaseNew, phaseWaiting, phaseQueued, phaseDropped, phaseEnding, phaseGone}},
		{"first commit failed", abandoned, []taskPhase{phaseNew, phaseWaiting, phaseEnding, phaseGone}},
	}
	for _, tc := range tests {
		if got := phases.of(tc.id); !slices.Equal(got, tc.want) {
			t.Errorf("%s: phases %v, want %v", tc.name, got, tc.want)
		}
	}
}
