package bgtask

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/bgtask/bgtask/internal/memstore"
	"github.com/bgtask/bgtask/internal/storefake"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"
)

type durableMem = storefake.DurableMem

// finishTasks spawns one task per result on owner of m and waits for each
// to end; a non-nil error makes it fail.
func finishTasks(t *testing.T, m *Manager, owner string, results ...error) []string {
	t.Helper()
	var ids []string
	for _, res := range results {
		id, err := m.Owner(owner).Spawn(t.Context(), func(context.Context, *Task) (any, error) { return "ok", res })
		if err != nil {
			t.Fatal(err)
		}
		if meta, err := m.Wait(t.Context(), id); !meta.Status.IsTerminal() || (err != nil) != (res != nil) {
			t.Fatalf("Wait(%s) = %s, %v", id, meta.Status, err)
		}
		ids = append(ids, id)
	}
	return ids
}

func eventIDs(evs []bgtype.Event) []string {
	var out []string
	for _, ev := range evs {
		if ev.Kind.IsTerminal() {
			out = append(out, ev.TaskID)
		}
	}
	return out
}

// The Plugin marks the terminal events it hands out as announced once the
// model heard them (at the next step), with one Commit per boundary and
// none at a boundary that has no terminal event to mark.
func TestPluginMarksAnnounced(t *testing.T) {
	ds := &durableMem{Store: memstore.New()}
	pr := newReceiverRun(t, WithStore(ds))
	ids := finishTasks(t, pr.m, "thread-1", nil, errors.New("boom"))
	msgs, err := pr.p.Deliver(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if got := eventIDs(msgs); !slices.Equal(got, ids) {
		t.Fatalf("delivered %q, want %q", got, ids)
	}
	for _, id := range ids {
		if m, _ := ds.Get(t.Context(), id); m.Announced {
			t.Errorf("%s announced before the model answered it", id)
		}
	}
	if _, err := pr.p.Deliver(t.Context()); err != nil { // the next step: heard
		t.Fatal(err)
	}
	for _, id := range ids {
		if m, _ := ds.Get(t.Context(), id); !m.Announced {
			t.Errorf("%s not announced after the next step", id)
		}
	}
	if _, err := pr.p.Deliver(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := ds.MarkCommits(); len(got) != 1 || !slices.Equal(got[0], ids) {
		t.Fatalf("Announce commits = %q, want one of %q", got, ids)
	}
}

// A mark that cannot be committed loses no event: Deliver hands the
// events out, and the next boundary commits the mark, even one that hands
// out nothing.
func TestPluginMarkFailureRetries(t *testing.T) {
	ds := &durableMem{Store: memstore.New(), FailMark: errors.New("disk full")}
	pr := newReceiverRun(t, WithStore(ds))
	ids := finishTasks(t, pr.m, "thread-1", nil)
	msgs, err := pr.p.Deliver(t.Context())
	if err != nil || !slices.Equal(eventIDs(msgs), ids) {
		t.Fatalf("Deliver with marks failing = %q, %v; want %q", eventIDs(msgs), err, ids)
	}
	if msgs, err := pr.p.Deliver(t.Context()); err != nil || len(msgs) != 0 { // the next step: its mark fails
		t.Fatalf("next Deliver = %q, %v; want nothing", eventIDs(msgs), err)
	}
	if m, _ := ds.Get(t.Context(), ids[0]); m.Announced {
		t.Fatal("announced although the mark failed")
	}
	ds.Mu.Lock()
	ds.FailMark = nil
	ds.Mu.Unlock()
	msgs, err = pr.p.Deliver(t.Context())
	if err != nil || len(msgs) != 0 {
		t.Fatalf("second Deliver = %v, %v; want nothing", messageKinds(msgs), err)
	}
	if got := ds.MarkCommits(); len(got) != 1 || !slices.Equal(got[0], ids) {
		t.Fatalf("Announce commits = %q, want one of %q", got, ids)
	}
	// The mark is in, so the next run does not announce it again.
	if err := pr.p.RunEnd(t.Context(), RunOutcome{RunID: "run-1"}); err != nil {
		t.Fatal(err)
	}
	if err := pr.p.RunStart(t.Context(), RunInfo{RunID: "run-2"}); err != nil {
		t.Fatal(err)
	}
	if msgs, err := pr.p.Deliver(t.Context()); err != nil || len(msgs) != 0 {
		t.Fatalf("next run delivered %v, %v; want nothing", messageKinds(msgs), err)
	}
}

// After a restart, the next run announces once, oldest first, every
// terminal record that the previous process ended but its owner's loop
// never took; not the announced ones, not the silent ones, not another
// owner's.
func TestRestoreReannouncesUntaken(t *testing.T) {
	ds := &durableMem{Store: memstore.New()}
	m1, err := New(WithStore(ds))
	if err != nil {
		t.Fatal(err)
	}
	ids := finishTasks(t, m1, "thread-1", nil, errors.New("boom"), nil)
	finishTasks(t, m1, "thread-2", nil)
	silent, err := m1.Owner("thread-1").Spawn(t.Context(), func(context.Context, *Task) (any, error) { return nil, nil }, WithWake(bgtype.WakeSilent))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m1.Wait(t.Context(), silent); err != nil {
		t.Fatal(err)
	}
	if err := m1.Owner("thread-1").MarkAnnounced(t.Context(), ids[1]); err != nil {
		t.Fatal(err)
	}
	if err := m1.Shutdown(t.Context()); err != nil { // its inboxes, never drained, are gone
		t.Fatal(err)
	}

	pr := newReceiverRun(t, WithStore(ds))
	msgs, err := pr.p.Deliver(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := eventIDs(msgs), []string{ids[0], ids[2]}; !slices.Equal(got, want) {
		t.Fatalf("first run after the restart delivered %q, want %q", got, want)
	}
	if err := pr.p.RunEnd(t.Context(), RunOutcome{RunID: "run-1"}); err != nil {
		t.Fatal(err)
	}
	if err := pr.p.RunStart(t.Context(), RunInfo{RunID: "run-2"}); err != nil {
		t.Fatal(err)
	}
	if msgs, err := pr.p.Deliver(t.Context()); err != nil || len(msgs) != 0 {
		t.Fatalf("second run delivered %v, %v; want nothing", messageKinds(msgs), err)
	}
}

// An event this process delivered and that waits undrained (in the run's
// inbox, or kept between runs) is not announced a second time by the next
// RunStart.
func TestRestoreSkipsEventsStillWaiting(t *testing.T) {
	ds := &durableMem{Store: memstore.New()}
	pr := newReceiverRun(t, WithStore(ds))
	inRun := finishTasks(t, pr.m, "thread-1", nil)
	if err := pr.p.RunEnd(t.Context(), RunOutcome{RunID: "run-1"}); err != nil {
		t.Fatal(err)
	}
	between := finishTasks(t, pr.m, "thread-1", nil)
	if err := pr.p.RunStart(t.Context(), RunInfo{RunID: "run-2"}); err != nil {
		t.Fatal(err)
	}
	msgs, err := pr.p.Deliver(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := eventIDs(msgs), append(inRun, between...); !slices.Equal(got, want) {
		t.Fatalf("delivered %q, want %q once each", got, want)
	}
}

// A corrupt record is reported, naming it, and skipped: the owner's other
// stale records are still interrupted and announced, and the run starts.
func TestRestoreSkipsCorruptRecord(t *testing.T) {
	ds := &durableMem{Store: memstore.New()}
	for _, m := range []bgtype.TaskMeta{
		{ID: "task_bad", Owner: "thread-1", Status: bgtype.StatusRunning, CreatedAt: rt0, Instance: "gone"},
		{ID: "task_good", Owner: "thread-1", Status: bgtype.StatusRunning, CreatedAt: rt1, Instance: "gone"},
	} {
		if err := ds.Store.Commit(t.Context(), "thread-1", store.UpsertAction(m)); err != nil {
			t.Fatal(err)
		}
	}
	ds.Corrupt = "task_bad"
	m := newTestManager(t, WithStore(ds))
	done, err := m.Restore(t.Context(), "thread-1")
	if !errors.Is(err, bgtype.ErrCorrupt) || err.Error() != `bgtask: restore skipped corrupt records: bgtask: corrupt task metadata: task task_bad: unknown status "paused"` {
		t.Fatalf("Restore error = %v, want one naming task_bad", err)
	}
	if len(done) != 1 || done[0].ID != "task_good" || done[0].Status != bgtype.StatusInterrupted {
		t.Fatalf("Restore interrupted %+v, want task_good", done)
	}
	p, err := m.NewReceiver("thread-1", ReceiverConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.RunStart(t.Context(), RunInfo{RunID: "run-1"}); err != nil {
		t.Fatalf("RunStart with a corrupt record: %v", err)
	}
	msgs, err := p.Deliver(t.Context())
	if err != nil || !slices.Equal(eventIDs(msgs), []string{"task_good"}) {
		t.Fatalf("Deliver = %q, %v; want task_good's interruption once", eventIDs(msgs), err)
	}
}

// recovering is a store whose Recover reports n and err.
type recovering struct {
	*memstore.Store
	n     int
	err   error
	calls int
}

func (r *recovering) InterruptOrphaned(context.Context) (int, error) { r.calls++; return r.n, r.err }

// Manager.Recover hands the work to a OrphanInterrupter store and wraps its error;
// with any other store it recovers nothing.
func TestManagerRecover(t *testing.T) {
	for _, tc := range []struct {
		name    string
		store   store.Store
		n       int
		errText string
	}{
		{"memory store", memstore.New(), 0, ""},
		{"recoverer", &recovering{Store: memstore.New(), n: 3}, 3, ""},
		{"recoverer fails", &recovering{Store: memstore.New(), n: 1, err: errors.New("disk gone")}, 1, "bgtask: recover: disk gone"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newTestManager(t, WithStore(tc.store))
			n, err := m.InterruptOrphaned(t.Context())
			if n != tc.n || (err == nil) != (tc.errText == "") || err != nil && err.Error() != tc.errText {
				t.Fatalf("InterruptOrphaned = %d, %v; want %d, %q", n, err, tc.n, tc.errText)
			}
		})
	}
}

// A task another instance's reaper interrupted reaches the owner once:
// RunStart announces the unannounced record, and the store's notice of it
// is dropped, in the same batch or a later one; the next run has nothing.
func TestPluginNoticeOfAnnouncedTaskDropped(t *testing.T) {
	f := &fakeShared{Store: memstore.New(), Notices: map[string][]bgtype.Event{}}
	reaped := bgtype.TaskMeta{ID: "task_reaped", Owner: "thread-1", Type: bgtype.TypeTask, Status: bgtype.StatusInterrupted, Instance: "gone", Attempt: 2,
		Error: "instance gone", ErrorKind: bgtype.KindInterrupted, CreatedAt: rt0, FinishedAt: rt1}
	if err := f.Commit(t.Context(), "thread-1", store.UpsertAction(reaped)); err != nil {
		t.Fatal(err)
	}
	notice := bgtype.Event{Kind: bgtype.EventInterrupted, TaskID: reaped.ID, Error: reaped.Error, ErrorKind: bgtype.KindInterrupted}
	f.Notices["thread-1"] = []bgtype.Event{notice}
	pr := newReceiverRun(t, WithStore(f)) // RunStart announces the record
	msgs, err := pr.p.Deliver(t.Context())
	if err != nil || !slices.Equal(eventIDs(msgs), []string{reaped.ID}) {
		t.Fatalf("Deliver = %q, %v; want the interruption once", eventIDs(msgs), err)
	}
	f.Mu.Lock()
	f.Notices["thread-1"] = []bgtype.Event{notice} // a second reaper's late notice
	f.Mu.Unlock()
	if msgs, err := pr.p.Deliver(t.Context()); err != nil || len(msgs) != 0 {
		t.Fatalf("Deliver of a late notice = %q, %v; want nothing", eventIDs(msgs), err)
	}
	if m, _ := f.Get(t.Context(), reaped.ID); !m.Announced {
		t.Fatal("reaped record not announced")
	}
}

// The ids delivered and not marked are bounded: the oldest is forgotten
// first, so a host that never marks cannot grow the Manager without bound.
func TestAnnouncedForgetsOldest(t *testing.T) {
	var a announced
	for i := range maxUnmarked + 2 {
		a.add("o", "o", fmt.Sprint("task_", i))
	}
	for _, tc := range []struct {
		id   string
		want bool
	}{
		{"task_0", false},
		{"task_1", false},
		{"task_2", true},
		{fmt.Sprint("task_", maxUnmarked+1), true},
	} {
		if got := a.has(tc.id); got != tc.want {
			t.Errorf("has(%s) = %v, want %v", tc.id, got, tc.want)
		}
	}
	if len(a.sent) != maxUnmarked {
		t.Errorf("%d ids kept, want %d", len(a.sent), maxUnmarked)
	}
	a.done("o", []string{"task_2"})
	if a.has("task_2") {
		t.Error("has(task_2) after done")
	}
}
