package storetest

import (
	"encoding/json"
	"testing"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"

	"github.com/bgtask/bgtask"
)

// fullRecords are records that set every field a store keeps, in each of
// the shapes the Manager writes.
func fullRecords(owner string) []bgtype.TaskMeta {
	base := bgtype.TaskMeta{
		Owner:       owner,
		Type:        "subagent",
		Name:        "indexer",
		Description: "index the repository: ünïcode, \"quotes\", <tags> & tabs\t",
		CreatedAt:   at(1),
		StartedAt:   at(2),
		Parent:      bgtype.Parent{TaskID: "task_parent", RunID: "run_1", CallID: "call_1", AgentID: "agent_1"},
		Detached:    true,
		Instance:    "instance-a",
		Attempt:     3,
		Wake:        bgtype.WakeOnActivity,
		Tags:        []string{"deploy", "ünïcode <tag> & \"quotes\""},
	}
	awaiting := base
	awaiting.ID, awaiting.Status = "task_awaiting", bgtype.StatusAwaitingInput
	awaiting.Input = &bgtype.InputRequest{ID: "req_1", Prompt: "Which branch?"}
	awaiting.MoreInput = []bgtype.InputRequest{{ID: "req_2", Prompt: "Which tag? ünïcode <tag> & \"quotes\""}, {ID: "req_3", Prompt: "Go on?"}}

	completed := base
	completed.ID, completed.Name, completed.Status = "task_completed", "", bgtype.StatusCompleted
	completed.Result = json.RawMessage(`{"files":[1,2.5,"x"],"nested":{"ok":true,"none":null}}`)
	completed.FinishedAt = at(3)
	completed.Wake = bgtype.WakeSilent
	completed.OutputBytes = 11

	failed := base
	failed.ID, failed.Name, failed.Status = "task_failed", "", bgtype.StatusFailed
	failed.Error, failed.ErrorKind = "panic: boom", bgtype.KindPanic
	failed.Stack = "goroutine 7 [running]:\nmain.f()\n\t/src/main.go:12 +0x1d\n"
	failed.FinishedAt = at(4)
	failed.Parent = bgtype.Parent{RunID: "run_1"}
	failed.Detached = false
	failed.Wake = ""
	failed.OutputBytes = 1 << 40 // past 32 bits

	nullResult := completed
	nullResult.ID = "task_null_result"
	nullResult.Result = json.RawMessage(`null`)

	canceled := base
	canceled.ID, canceled.Name, canceled.Status = "task_cancelled", "", bgtype.StatusCanceled
	canceled.Error = "bgtask: task cancelled: the user changed plans <now> & \"then\""
	canceled.CancelReason = "the user changed plans <now> & \"then\""
	canceled.FinishedAt = at(5)

	minimal := bgtype.TaskMeta{ID: "task_minimal", Owner: owner, Status: bgtype.StatusQueued}
	return []bgtype.TaskMeta{awaiting, completed, failed, nullResult, canceled, minimal}
}

// testRoundTrip commits records that set every field and reads them back
// through Get, Load, List and Children.
func testRoundTrip(t *testing.T, c Config) {
	s := c.New(t)
	const owner = "owner-roundtrip"
	recs := fullRecords(owner)
	for _, m := range recs {
		commit(t, s, owner, store.UpsertAction(m))
	}
	utc := func(what string, m bgtype.TaskMeta) {
		t.Helper()
		if d := notUTC(m); d != "" {
			t.Errorf("%s returns %s with stamps not in UTC:%s", what, m.ID, d)
		}
	}
	want := store.Snapshot{Tasks: map[string]bgtype.TaskMeta{}}
	for _, m := range recs {
		want.Tasks[m.ID] = m
		t.Run(m.ID, func(t *testing.T) {
			got := get(t, s, m.ID)
			if d := diffMeta(m, got); d != "" {
				t.Errorf("Get(%q) differs from the committed record:\n%s", m.ID, d)
			}
			utc("Get", got)
		})
	}
	snap := load(t, s, owner)
	if d := diffSnap(want, snap); d != "" {
		t.Errorf("Load(%q) differs from the committed records:\n%s", owner, d)
	}
	for _, id := range snapIDs(snap) {
		utc("Load", snap.Tasks[id])
	}
	ms := list(t, "List", s.List(t.Context(), owner))
	store.SortMetas(recs)
	wantIDs(t, "List ids", idsOf(ms), idsOf(recs))
	for i := range min(len(ms), len(recs)) {
		if d := diffMeta(recs[i], ms[i]); ms[i].ID == recs[i].ID && d != "" {
			t.Errorf("List record %s differs from the committed record:\n%s", ms[i].ID, d)
		}
		utc("List", ms[i])
	}
	kids := list(t, "Children", s.Children(t.Context(), "task_parent"))
	wantIDs(t, "Children(task_parent) ids", idsOf(kids), []string{"task_awaiting", "task_cancelled", "task_completed", "task_null_result"})
	for _, k := range kids {
		if d := diffMeta(want.Tasks[k.ID], k); d != "" {
			t.Errorf("Children record %s differs from the committed record:\n%s", k.ID, d)
		}
		utc("Children", k)
	}
}

// testGetUnknown: Get of an id never committed is ErrNotFound.
func testGetUnknown(t *testing.T, c Config) {
	s := c.New(t)
	commit(t, s, "owner-a", store.UpsertAction(rec("task_known", "owner-a", bgtype.StatusRunning, 1)))
	for _, id := range []string{"task_unknown", ""} {
		_, err := s.Get(t.Context(), id)
		wantErr(t, "Get("+id+")", err, bgtask.ErrNotFound)
	}
}

// testLoadUnknownOwner: an owner without tasks has an empty snapshot and
// an empty listing, and no error.
func testLoadUnknownOwner(t *testing.T, c Config) {
	s := c.New(t)
	commit(t, s, "owner-a", store.UpsertAction(rec("task_a", "owner-a", bgtype.StatusRunning, 1)))
	snap, err := s.Load(t.Context(), "owner-nobody")
	if err != nil {
		t.Fatalf("Load(owner-nobody): %v", err)
	}
	if snap.Tasks == nil || len(snap.Tasks) != 0 {
		t.Errorf("Load(owner-nobody) = %#v, want an empty, non-nil Tasks map", snap.Tasks)
	}
	ms := list(t, "List(owner-nobody)", s.List(t.Context(), "owner-nobody"))
	wantIDs(t, "List(owner-nobody)", idsOf(ms), []string{})
}

// testNoAliasing: the store keeps no reference to what Commit is given and
// returns records that share nothing with what it keeps.
func testNoAliasing(t *testing.T, c Config) {
	s := c.New(t)
	const owner = "owner-alias"
	m := rec("task_alias", owner, bgtype.StatusAwaitingInput, 1)
	m.Result = json.RawMessage(`{"v":1}`)
	m.Input = &bgtype.InputRequest{ID: "req", Prompt: "p"}
	want := m
	want.Result = json.RawMessage(`{"v":1}`)
	want.Input = &bgtype.InputRequest{ID: "req", Prompt: "p"}
	a := store.UpsertAction(m)
	commit(t, s, owner, a)
	copy(m.Result, `{"v":2}`) // the caller reuses its buffers
	a.Tasks[0].Input.Prompt = "changed"
	a.Tasks[0].Status = bgtype.StatusFailed
	if d := diffMeta(want, get(t, s, m.ID)); d != "" {
		t.Fatalf("after the caller changed its action, Get differs:\n%s", d)
	}

	got := get(t, s, m.ID)
	copy(got.Result, `{"v":3}`)
	got.Input.Prompt = "changed by reader"
	snap := load(t, s, owner)
	r := snap.Tasks[m.ID]
	if r.Input != nil {
		r.Input.Prompt = "changed by loader"
	}
	copy(r.Result, `{"v":4}`)
	for _, l := range list(t, "List", s.List(t.Context(), owner)) {
		copy(l.Result, `{"v":5}`)
		if l.Input != nil {
			l.Input.Prompt = "changed by lister"
		}
	}
	if d := diffMeta(want, get(t, s, m.ID)); d != "" {
		t.Fatalf("after readers changed returned records, Get differs:\n%s", d)
	}
}
