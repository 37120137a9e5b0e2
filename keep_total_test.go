package bgtask

import (
	"log/slog"
	"slices"
	"strconv"
	"testing"

	"github.com/bgtask/bgtask/bgtype"
)

// keptByOwner lists what the Manager keeps for closed owners, as
// "owner:kind:task" in the Manager-wide order of arrival.
func keptByOwner(m *Manager) (kept []string, total int) {
	m.keepMu.Lock()
	defer m.keepMu.Unlock()
	type at struct {
		seq uint64
		s   string
	}
	var all []at
	for owner, k := range m.kept {
		for i, ev := range k.evs {
			all = append(all, at{k.seqs[i], owner + ":" + string(ev.Kind) + ":" + ev.TaskID})
		}
	}
	slices.SortFunc(all, func(a, b at) int { return int(a.seq) - int(b.seq) })
	for _, a := range all {
		kept = append(kept, a.s)
	}
	return kept, m.keptOrder.total
}

// The events kept for closed owners are bounded in total, across owners
// (Tuning.KeptEventsTotal): at the limit the oldest event that does not
// end a task goes first, whoever's it is, with a warning; an end goes
// only when every kept event is one, the oldest first, with an error; a
// new event that does not end a task is then the one dropped. An owner's
// next Receiver takes its events out of the count.
func TestKeptEventsTotal(t *testing.T) {
	t.Parallel()
	logs, logger := newCapture()
	m := newTestManager(t, WithTuning(Tuning{KeptEventsTotal: 4}), WithLogger(logger))
	end := func(id string) bgtype.Event { return bgtype.Event{Kind: bgtype.EventCompleted, TaskID: id} }
	note := func(id string) bgtype.Event {
		return bgtype.Event{Kind: bgtype.EventCustom, EventType: "note", TaskID: id}
	}
	steps := []struct {
		owner string
		ev    bgtype.Event
		want  []string // kept after the step, oldest first
	}{
		{"o1", note("a"), []string{"o1:custom:a"}},
		{"o2", end("b"), []string{"o1:custom:a", "o2:completed:b"}},
		{"o3", note("c"), []string{"o1:custom:a", "o2:completed:b", "o3:custom:c"}},
		{"o4", end("d"), []string{"o1:custom:a", "o2:completed:b", "o3:custom:c", "o4:completed:d"}},
		{"o5", end("e"), []string{"o2:completed:b", "o3:custom:c", "o4:completed:d", "o5:completed:e"}},     // a goes
		{"o6", note("f"), []string{"o2:completed:b", "o4:completed:d", "o5:completed:e", "o6:custom:f"}},    // c goes
		{"o6", note("g"), []string{"o2:completed:b", "o4:completed:d", "o5:completed:e", "o6:custom:g"}},    // f goes
		{"o7", end("h"), []string{"o2:completed:b", "o4:completed:d", "o5:completed:e", "o7:completed:h"}},  // g goes
		{"o8", note("i"), []string{"o2:completed:b", "o4:completed:d", "o5:completed:e", "o7:completed:h"}}, // only ends: i goes
		{"o9", end("j"), []string{"o4:completed:d", "o5:completed:e", "o7:completed:h", "o9:completed:j"}},  // b goes
	}
	for i, st := range steps {
		m.orphanEvent(st.owner, st.ev, defaultKeepLimit)
		if got, total := keptByOwner(m); !slices.Equal(got, st.want) || total != len(st.want) {
			t.Fatalf("step %d (%s %s): kept %q (count %d), want %q", i, st.owner, st.ev.TaskID, got, total, st.want)
		}
	}
	var warned, failed []string
	for _, r := range logs.records() {
		const (
			warn = "bgtask: kept events of closed owners: total limit reached: oldest event dropped"
			fail = "bgtask: kept events of closed owners: total limit reached: terminal event dropped"
		)
		switch {
		case r.Level == slog.LevelWarn && r.Msg == warn && r.Attrs["limit"] == "4":
			warned = append(warned, r.Attrs["owner"]+":"+r.Attrs["task_id"])
		case r.Level == slog.LevelError && r.Msg == fail && r.Attrs["limit"] == "4" && r.Attrs["kind"] == "completed":
			failed = append(failed, r.Attrs["owner"]+":"+r.Attrs["task_id"])
		default:
			t.Errorf("unexpected log: %v %q %v", r.Level, r.Msg, r.Attrs)
		}
	}
	if want := []string{"o1:a", "o3:c", "o6:f", "o6:g", "o8:i"}; !slices.Equal(warned, want) {
		t.Errorf("warned of %q, want %q", warned, want)
	}
	if want := []string{"o2:b"}; !slices.Equal(failed, want) {
		t.Errorf("errors for %q, want %q", failed, want)
	}

	// o5's next Receiver takes its end: room for one more without a drop.
	r, err := m.NewReceiver("o5", ReceiverConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.RunStart(t.Context(), RunInfo{RunID: "run-1"}); err != nil {
		t.Fatal(err)
	}
	if evs, err := r.Deliver(t.Context()); err != nil || !slices.Equal(eventIDs(evs), []string{"e"}) {
		t.Fatalf("o5's next Receiver delivered %q, %v; want e", eventIDs(evs), err)
	}
	m.orphanEvent("o10", note("k"), defaultKeepLimit)
	want := []string{"o4:completed:d", "o7:completed:h", "o9:completed:j", "o10:custom:k"}
	if got, total := keptByOwner(m); !slices.Equal(got, want) || total != 4 {
		t.Fatalf("after o5 took its event: kept %q (count %d), want %q", got, total, want)
	}
	if n := len(logs.records()); n != 6 {
		t.Fatalf("%d log records, want the 6 drops only", n)
	}
}

// Many closed owners, each far under its own limit, hold no more than the
// total: every end, and the newest progress in the room left; the
// progress dropped is the oldest, each with a warning.
func TestKeptEventsTotalManyOwners(t *testing.T) {
	t.Parallel()
	const owners, total = 1000, 150
	logs, logger := newCapture()
	m := newTestManager(t, WithTuning(Tuning{KeptEventsTotal: total}), WithLogger(logger))
	var wantKept, wantDropped []string
	for i := range owners {
		owner := "thread-" + strconv.Itoa(i)
		note := "p" + strconv.Itoa(i)
		m.orphanEvent(owner, bgtype.Event{Kind: bgtype.EventCustom, EventType: "note", TaskID: note}, defaultKeepLimit)
		if i < owners-(total-owners/10) {
			wantDropped = append(wantDropped, owner+":"+note)
		} else {
			wantKept = append(wantKept, owner+":custom:"+note)
		}
		if i%10 == 0 {
			end := "t" + strconv.Itoa(i)
			m.orphanEvent(owner, bgtype.Event{Kind: bgtype.EventCompleted, TaskID: end}, defaultKeepLimit)
			wantKept = append(wantKept, owner+":completed:"+end)
		}
	}
	got, n := keptByOwner(m)
	slices.Sort(got)
	slices.Sort(wantKept)
	if n != total || !slices.Equal(got, wantKept) {
		t.Fatalf("kept %d events (count %d): %q\nwant %q", len(got), n, got, wantKept)
	}
	var dropped []string
	for _, r := range logs.find(slog.LevelWarn, "bgtask: kept events of closed owners: total limit reached: oldest event dropped") {
		dropped = append(dropped, r.Attrs["owner"]+":"+r.Attrs["task_id"])
	}
	if !slices.Equal(dropped, wantDropped) || len(logs.records()) != len(wantDropped) {
		t.Fatalf("dropped %d events (%d log records), want the %d oldest notes in order", len(dropped), len(logs.records()), len(wantDropped))
	}
	m.keepMu.Lock()
	queued := m.keptOrder.progress.Len() + m.keptOrder.ends.Len()
	m.keepMu.Unlock()
	if queued != total {
		t.Fatalf("the order holds %d refs for %d events", queued, total)
	}
}
