package storetest

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"

	"github.com/bgtask/bgtask"
)

// step is one Commit of a sequence compared with the reducer.
type step struct {
	name    string
	actions []store.Action
}

// runSteps commits each step to a new store and to the oracle, and checks
// after each that the store holds what the reducer computes.
func runSteps(t *testing.T, c Config, owner string, steps []step) store.Store {
	t.Helper()
	s := c.New(t)
	o := oracle{}
	for _, st := range steps {
		o.commitBoth(t, s, owner, st.actions...)
		o.check(t, s, owner, st.name)
	}
	return s
}

// testUpsert: inserts and updates, one action per commit and several in
// one commit, agree with the reducer.
func testUpsert(t *testing.T, c Config) {
	const owner = "owner-upsert"
	a := rec("task_a", owner, bgtype.StatusQueued, 1)
	a.Name, a.Description = "a", "first"
	aRun := a
	aRun.Status, aRun.StartedAt, aRun.Description, aRun.Instance = bgtype.StatusRunning, at(2), "running now", "inst-1"
	aDone := ended(aRun, bgtype.StatusCompleted, 3)
	aDone.Result = json.RawMessage(`"done"`)
	b := rec("task_b", owner, bgtype.StatusRunning, 2)
	bAwait := b
	bAwait.Status, bAwait.Input = bgtype.StatusAwaitingInput, &bgtype.InputRequest{ID: "r1", Prompt: "yes?"}
	bBack := b
	bBack.Description = "answered"
	s := runSteps(t, c, owner, []step{
		{"insert queued", []store.Action{store.UpsertAction(a)}},
		{"queued to running", []store.Action{store.UpsertAction(aRun)}},
		{"two upserts in one commit", []store.Action{store.UpsertAction(b), store.UpsertAction(bAwait)}},
		{"awaiting_input back to running", []store.Action{store.UpsertAction(bBack)}},
		{"complete", []store.Action{store.UpsertAction(aDone)}},
		{"same record again", []store.Action{store.UpsertAction(aDone)}},
	})
	// The reducer is the oracle; these pin what it must have computed.
	if got := get(t, s, "task_a"); got.Status != bgtype.StatusCompleted || string(got.Result) != `"done"` ||
		got.Description != "running now" || !got.StartedAt.Equal(at(2)) || !got.FinishedAt.Equal(at(3)) {
		t.Errorf("task_a = %s %s %q started %s finished %s, want completed \"done\" %q started %s finished %s",
			got.Status, got.Result, got.Description, fmtTime(got.StartedAt), fmtTime(got.FinishedAt),
			"running now", fmtTime(at(2)), fmtTime(at(3)))
	}
	if got := get(t, s, "task_b"); got.Status != bgtype.StatusRunning || got.Input != nil || got.Description != "answered" {
		t.Errorf("task_b = %s input %v %q, want running, no input, %q", got.Status, got.Input, got.Description, "answered")
	}
}

// testReplaceAll: ReplaceAll leaves exactly the given ids, merging each
// with its stored record, so a terminal record stays as it was.
func testReplaceAll(t *testing.T, c Config) {
	const owner = "owner-replace"
	done := ended(rec("task_done", owner, bgtype.StatusRunning, 1), bgtype.StatusCompleted, 5)
	done.Result = json.RawMessage(`{"n":1}`)
	live := rec("task_live", owner, bgtype.StatusRunning, 2)
	gone := rec("task_gone", owner, bgtype.StatusRunning, 3)
	doneAgain := done
	doneAgain.Status, doneAgain.FinishedAt, doneAgain.Result, doneAgain.Error = bgtype.StatusRunning, at(0), nil, "rewound"
	liveEnds := ended(live, bgtype.StatusFailed, 6)
	liveEnds.Error = "boom"
	fresh := rec("task_fresh", owner, bgtype.StatusQueued, 4)
	runSteps(t, c, owner, []step{
		{"seed", []store.Action{store.UpsertAction(done), store.UpsertAction(live), store.UpsertAction(gone)}},
		{"replace all", []store.Action{store.ReplaceAllAction(doneAgain, liveEnds, fresh)}},
		{"replace all with a duplicate id", []store.Action{store.ReplaceAllAction(fresh, fresh, liveEnds)}},
		{"replace all with nothing", []store.Action{store.ReplaceAllAction()}},
		{"insert after empty", []store.Action{store.UpsertAction(fresh)}},
	})
	// Pin the reducer's outcome of the second step on a fresh store.
	s2 := c.New(t)
	commit(t, s2, owner, store.UpsertAction(done), store.UpsertAction(live), store.UpsertAction(gone))
	commit(t, s2, owner, store.ReplaceAllAction(doneAgain, liveEnds, fresh))
	wantIDs(t, "ids after ReplaceAll", snapIDs(load(t, s2, owner)), []string{"task_done", "task_fresh", "task_live"})
	if d := diffMeta(done, get(t, s2, "task_done")); d != "" {
		t.Errorf("terminal task_done changed by ReplaceAll:\n%s", d)
	}
	if got := get(t, s2, "task_live"); got.Status != bgtype.StatusFailed || got.Error != "boom" {
		t.Errorf("task_live = %s %q, want failed \"boom\"", got.Status, got.Error)
	}
	_, err := s2.Get(t.Context(), "task_gone")
	wantErr(t, "Get(task_gone) after ReplaceAll without it", err, bgtask.ErrNotFound)
}

// testRemove: Remove forgets terminal records only; unknown ids are
// ignored.
func testRemove(t *testing.T, c Config) {
	const owner = "owner-remove"
	done := ended(rec("task_done", owner, bgtype.StatusRunning, 1), bgtype.StatusCanceled, 4)
	failed := ended(rec("task_failed", owner, bgtype.StatusRunning, 2), bgtype.StatusFailed, 5)
	live := rec("task_live", owner, bgtype.StatusRunning, 3)
	queued := rec("task_queued", owner, bgtype.StatusQueued, 4)
	s := runSteps(t, c, owner, []step{
		{"seed", []store.Action{store.UpsertAction(done), store.UpsertAction(failed), store.UpsertAction(live), store.UpsertAction(queued)}},
		{"remove", []store.Action{store.RemoveAction("task_done", "task_live", "task_queued", "task_unknown")}},
		{"remove nothing", []store.Action{store.RemoveAction()}},
	})
	wantIDs(t, "ids after Remove", snapIDs(load(t, s, owner)), []string{"task_failed", "task_live", "task_queued"})
	_, err := s.Get(t.Context(), "task_done")
	wantErr(t, "Get(task_done) after Remove", err, bgtask.ErrNotFound)
	if got := get(t, s, "task_live"); got.Status != bgtype.StatusRunning {
		t.Errorf("task_live = %s after Remove, want running", got.Status)
	}
}

// testInvalidActions: a Commit with an invalid action returns an error
// matching ErrInvalidAction and changes nothing, even when a valid action
// comes before it.
func testInvalidActions(t *testing.T, c Config) {
	const owner = "owner-invalid"
	ok := func(id string) bgtype.TaskMeta { return rec(id, owner, bgtype.StatusRunning, 1) }
	with := func(f func(*bgtype.TaskMeta)) bgtype.TaskMeta {
		m := ok("task_bad")
		f(&m)
		return m
	}
	cases := []struct {
		name string
		bad  store.Action
	}{
		{"unknown op", store.Action{Op: "merge", Tasks: []bgtype.TaskMeta{ok("task_bad")}}},
		{"empty op", store.Action{Tasks: []bgtype.TaskMeta{ok("task_bad")}}},
		{"upsert of no task", store.Action{Op: store.OpUpsert}},
		{"upsert of two tasks", store.Action{Op: store.OpUpsert, Tasks: []bgtype.TaskMeta{ok("task_bad"), ok("task_bad2")}}},
		{"task of another owner", store.UpsertAction(with(func(m *bgtype.TaskMeta) { m.Owner = "owner-other" }))},
		{"task without owner", store.UpsertAction(with(func(m *bgtype.TaskMeta) { m.Owner = "" }))},
		{"empty id", store.UpsertAction(with(func(m *bgtype.TaskMeta) { m.ID = "" }))},
		{"unknown status", store.UpsertAction(with(func(m *bgtype.TaskMeta) { m.Status = "paused" }))},
		{"result not JSON", store.UpsertAction(with(func(m *bgtype.TaskMeta) { m.Result = json.RawMessage(`{"a":`) }))},
		{"negative attempt", store.UpsertAction(with(func(m *bgtype.TaskMeta) { m.Attempt = -1 }))},
		{"negative output size", store.UpsertAction(with(func(m *bgtype.TaskMeta) { m.Status, m.OutputBytes = bgtype.StatusCompleted, -1 }))},
		{"unknown wake policy", store.UpsertAction(with(func(m *bgtype.TaskMeta) { m.Wake = "loud" }))},
		{"replace all with a task of another owner", store.ReplaceAllAction(ok("task_bad"), with(func(m *bgtype.TaskMeta) {
			m.ID, m.Owner = "task_bad2", "owner-other"
		}))},
		{"replace all with an unknown status", store.ReplaceAllAction(with(func(m *bgtype.TaskMeta) { m.Status = "paused" }))},
		{"replace all with an empty status", store.ReplaceAllAction(with(func(m *bgtype.TaskMeta) { m.Status = "" }))},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := c.New(t)
			seed := ok("task_seed")
			commit(t, s, owner, store.UpsertAction(seed))
			before := load(t, s, owner)
			changed := seed
			changed.Status, changed.Description = bgtype.StatusCompleted, "should not be stored"
			orders := map[string][]store.Action{
				"alone":              {tc.bad},
				"after a valid one":  {store.UpsertAction(changed), store.UpsertAction(ok("task_new")), tc.bad},
				"before a valid one": {tc.bad, store.UpsertAction(changed)},
			}
			for _, order := range []string{"alone", "after a valid one", "before a valid one"} {
				err := s.Commit(t.Context(), owner, orders[order]...)
				wantErr(t, fmt.Sprintf("Commit(%s) %s", tc.name, order), err, store.ErrInvalidAction)
				if d := diffSnap(before, load(t, s, owner)); d != "" {
					t.Errorf("Commit(%s) %s changed the store:\n%s", tc.name, order, d)
				}
				for _, id := range []string{"task_bad", "task_bad2", "task_new"} {
					if _, err := s.Get(t.Context(), id); err == nil {
						t.Errorf("Commit(%s) %s stored %s", tc.name, order, id)
					}
				}
				other := load(t, s, "owner-other")
				if len(other.Tasks) != 0 {
					t.Errorf("Commit(%s) %s stored %q under owner-other", tc.name, order, snapIDs(other))
				}
			}
		})
	}
}

// testBlankOwner: Commit for an empty or blank owner returns an error
// matching ErrInvalidArgument (blank owner) and changes nothing.
func testBlankOwner(t *testing.T, c Config) {
	s := c.New(t)
	for _, owner := range []string{"", " \t\n"} {
		m := rec("task_blank", owner, bgtype.StatusRunning, 1)
		for _, actions := range [][]store.Action{nil, {store.UpsertAction(m)}, {store.ReplaceAllAction()}} {
			err := s.Commit(t.Context(), owner, actions...)
			wantErr(t, fmt.Sprintf("Commit(%q, %s)", owner, describe(actions)), err, bgtype.ErrInvalidOwner)
		}
	}
	_, err := s.Get(t.Context(), "task_blank")
	wantErr(t, "Get(task_blank) after refused commits", err, bgtask.ErrNotFound)
}
