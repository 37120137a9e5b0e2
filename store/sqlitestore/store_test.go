package sqlitestore_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/store/sqlitestore"
)

// Every field of a record survives a commit, a close and a reopen.
func TestRoundTripEveryField(t *testing.T) {
	t.Parallel()
	s, path := open(t)
	full := bgtype.TaskMeta{
		ID: "task_full", Owner: "thread-1", Type: bgtype.TypeSubAgent, Name: "research",
		Description: "reads three sources", Status: bgtype.StatusAwaitingInput,
		Error: "", Stack: "", Result: json.RawMessage(`{"partial":[1,2]}`),
		CreatedAt: base, StartedAt: base.Add(1500 * time.Microsecond),
		Parent:   bgtype.Parent{TaskID: "task_parent", RunID: "run-1", CallID: "call-1", AgentID: "agent-1"},
		Detached: true, Instance: "inst-a", Attempt: 3, Wake: bgtype.WakeOnActivity,
		Input: &bgtype.InputRequest{ID: "input_1", Prompt: "which source first?"},
	}
	failed := rec("thread-1", 2, bgtype.StatusFailed)
	failed.Error, failed.Stack = "panic: boom", "goroutine 7 [running]:"
	commit(t, s, "thread-1", store.UpsertAction(full), store.UpsertAction(failed))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, path, sqlitestore.WithoutRecovery()) // the live record stays as it was
	for _, want := range []bgtype.TaskMeta{full, failed} {
		if got := get(t, s, want.ID); !reflect.DeepEqual(got, want) {
			t.Fatalf("after reopen:\n got %+v\nwant %+v", got, want)
		}
	}
	snap, err := s.Load(t.Context(), "thread-1")
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Tasks) != 2 || !reflect.DeepEqual(snap.Tasks[full.ID], full) {
		t.Fatalf("Load = %+v", snap.Tasks)
	}
	if _, err := s.Get(t.Context(), "task_none"); !errors.Is(err, bgtask.ErrNotFound) || err.Error() != "bgtask: task not found: task_none" {
		t.Fatalf("Get(unknown) = %v", err)
	}
}

// The reducer runs inside the transaction: terminal is final, the attempt
// fence and the status order hold, identity fields are kept.
func TestCommitAppliesTheReducer(t *testing.T) {
	t.Parallel()
	s, _ := open(t)
	const o = "owner"
	running := rec(o, 1, bgtype.StatusRunning)
	running.Attempt = 2
	commit(t, s, o, store.UpsertAction(running))

	back := running
	back.Status = bgtype.StatusQueued
	fenced := rec(o, 1, bgtype.StatusCompleted)
	fenced.Attempt = 1
	renamed := running
	renamed.Name, renamed.Description = "other", "new description"
	commit(t, s, o, store.UpsertAction(back), store.UpsertAction(fenced), store.UpsertAction(renamed))
	got := get(t, s, running.ID)
	if got.Status != bgtype.StatusRunning || got.Attempt != 2 || got.Name != "" || got.Description != "new description" {
		t.Fatalf("after dropped updates: %+v", got)
	}

	done := rec(o, 1, bgtype.StatusCompleted)
	done.Attempt = 2
	commit(t, s, o, store.UpsertAction(done))
	late := rec(o, 1, bgtype.StatusFailed)
	late.Attempt, late.Error = 5, "late"
	commit(t, s, o, store.UpsertAction(late))
	if got := get(t, s, done.ID); got.Status != bgtype.StatusCompleted || got.Error != "" || got.Attempt != 2 || string(got.Result) != `{"n":1}` {
		t.Fatalf("terminal record changed: %+v", got)
	}
}

// ReplaceAll keeps exactly the given tasks, merging each with its stored
// record; a task of another owner is never moved; Remove forgets terminal
// records only.
func TestReplaceAllAndRemove(t *testing.T) {
	t.Parallel()
	s, _ := open(t)
	commit(t, s, "a", store.UpsertAction(rec("a", 1, bgtype.StatusCompleted)), store.UpsertAction(rec("a", 2, bgtype.StatusRunning)),
		store.UpsertAction(rec("a", 3, bgtype.StatusRunning)))
	commit(t, s, "b", store.UpsertAction(rec("b", 1, bgtype.StatusRunning)))

	stolen := rec("b", 1, bgtype.StatusCompleted)
	stolen.Owner = "a"
	reopened := rec("a", 1, bgtype.StatusRunning) // the stored record is terminal: kept as it is
	commit(t, s, "a", store.ReplaceAllAction(reopened, rec("a", 3, bgtype.StatusFailed), rec("a", 4, bgtype.StatusQueued), stolen))
	wantIDs(t, "List(a)", ids(t, s, "a"), idsOf("a", 1, 3, 4))
	if got := get(t, s, reopened.ID); got.Status != bgtype.StatusCompleted {
		t.Fatalf("terminal record after ReplaceAll: %s", got.Status)
	}
	if got := get(t, s, stolen.ID); got.Owner != "b" || got.Status != bgtype.StatusRunning {
		t.Fatalf("another owner's task after ReplaceAll: %+v", got)
	}

	commit(t, s, "a", store.RemoveAction(rec("a", 1, "").ID, rec("a", 4, "").ID, rec("b", 1, "").ID, "task_unknown"))
	wantIDs(t, "List(a) after Remove", ids(t, s, "a"), idsOf("a", 3, 4))
	wantIDs(t, "List(b) after Remove", ids(t, s, "b"), idsOf("b", 1))

	// An upsert of another owner's id is dropped, not moved.
	commit(t, s, "a", store.UpsertAction(stolen))
	if got := get(t, s, stolen.ID); got.Owner != "b" {
		t.Fatalf("upsert moved a task to another owner: %+v", got)
	}
}

// List yields oldest first, filtered by status; Children finds a task's
// children whatever their owner.
func TestListAndChildren(t *testing.T) {
	t.Parallel()
	s, _ := open(t)
	parent := rec("a", 1, bgtype.StatusRunning)
	c1, c2, c3 := rec("a", 4, bgtype.StatusCompleted), rec("a", 2, bgtype.StatusRunning), rec(parent.ID, 3, bgtype.StatusQueued)
	for _, c := range []*bgtype.TaskMeta{&c1, &c2, &c3} {
		c.Parent.TaskID = parent.ID
	}
	commit(t, s, "a", store.UpsertAction(c1), store.UpsertAction(parent), store.UpsertAction(c2))
	commit(t, s, parent.ID, store.UpsertAction(c3))

	wantIDs(t, "List(a)", ids(t, s, "a"), idsOf("a", 1, 2, 4))
	wantIDs(t, "List(a, running)", ids(t, s, "a", bgtype.StatusRunning), idsOf("a", 1, 2))
	wantIDs(t, "List(a, completed, queued)", ids(t, s, "a", bgtype.StatusCompleted, bgtype.StatusQueued), idsOf("a", 4))
	wantIDs(t, "List(nobody)", ids(t, s, "nobody"), nil)

	var kids []string
	for m, err := range s.Children(t.Context(), parent.ID) {
		if err != nil {
			t.Fatal(err)
		}
		kids = append(kids, m.ID)
	}
	wantIDs(t, "Children", kids, []string{c2.ID, c3.ID, c1.ID})
	for m, err := range s.Children(t.Context(), "") {
		t.Fatalf("Children(\"\") yielded %v, %v", m.ID, err)
	}

	var n int
	for m, err := range s.List(t.Context(), "a", bgtype.StatusRunning, "sleeping") {
		n++
		wantErr(t, "List(bad status)", err, `bgtask: invalid task status: "sleeping"`, bgtype.ErrInvalidStatus)
		if m.ID != "" {
			t.Fatalf("error pair carries %+v", m)
		}
	}
	if n != 1 {
		t.Fatalf("List(bad status) yielded %d pairs, want 1", n)
	}
}

// A bad action fails its own Commit with a clear error and changes nothing.
func TestCommitRefusesInvalidActions(t *testing.T) {
	t.Parallel()
	s, _ := open(t)
	good := rec("a", 1, bgtype.StatusRunning)
	badStatus := rec("a", 2, "sleeping")
	badJSON := rec("a", 3, bgtype.StatusCompleted)
	badJSON.Result = json.RawMessage(`{"n":`)
	other := rec("b", 4, bgtype.StatusRunning)
	for _, tc := range []struct {
		name    string
		owner   string
		actions []store.Action
		text    string
		targets []error
	}{
		{"blank owner", " ", []store.Action{store.UpsertAction(good)}, "bgtask: owner id is empty", []error{bgtype.ErrInvalidOwner}},
		{"unknown op", "a", []store.Action{store.UpsertAction(good), {Op: "merge"}}, `bgtask: invalid state action: unknown op "merge"`, []error{store.ErrInvalidAction}},
		{"upsert of two", "a", []store.Action{{Op: store.OpUpsert, Tasks: []bgtype.TaskMeta{good, good}}}, "bgtask: invalid state action: upsert carries 2 tasks, want 1", []error{store.ErrInvalidAction}},
		{"unknown status", "a", []store.Action{store.UpsertAction(good), store.UpsertAction(badStatus)}, `bgtask: invalid state action: bgtask: corrupt task metadata: task task_a_02: unknown status "sleeping"`, []error{store.ErrInvalidAction, bgtype.ErrCorrupt}},
		{"result not JSON", "a", []store.Action{store.ReplaceAllAction(good, badJSON)}, "bgtask: invalid state action: bgtask: corrupt task metadata: task task_a_03: result is not valid JSON", []error{store.ErrInvalidAction, bgtype.ErrCorrupt}},
		{"other owner", "a", []store.Action{store.UpsertAction(other)}, `bgtask: invalid state action: task task_b_04 belongs to owner "b", not "a"`, []error{store.ErrInvalidAction}},
		{"no id", "a", []store.Action{store.UpsertAction(bgtype.TaskMeta{Owner: "a", Status: bgtype.StatusRunning})}, "bgtask: invalid state action: bgtask: corrupt task metadata: task without id", []error{store.ErrInvalidAction, bgtype.ErrCorrupt}},
	} {
		err := s.Commit(t.Context(), tc.owner, tc.actions...)
		wantErr(t, tc.name, err, tc.text, tc.targets...)
	}
	wantIDs(t, "List(a)", ids(t, s, "a"), nil)
	wantIDs(t, "List(b)", ids(t, s, "b"), nil)
}

// After Close every method returns ErrClosed, which also matches
// bgtask.ErrClosed; Close is idempotent.
func TestClosed(t *testing.T) {
	t.Parallel()
	s, err := sqlitestore.Open(t.Context(), ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	commit(t, s, "a", store.UpsertAction(rec("a", 1, bgtype.StatusRunning)))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
	_, getErr := s.Get(t.Context(), rec("a", 1, "").ID)
	_, loadErr := s.Load(t.Context(), "a")
	var listErr, childErr error
	for _, e := range s.List(t.Context(), "a") {
		listErr = e
	}
	for _, e := range s.Children(t.Context(), "x") {
		childErr = e
	}
	for what, err := range map[string]error{
		"Commit":   s.Commit(t.Context(), "a", store.UpsertAction(rec("a", 2, bgtype.StatusRunning))),
		"Commit()": s.Commit(t.Context(), "a"),
		"Get":      getErr, "Load": loadErr, "List": listErr, "Children": childErr,
	} {
		wantErr(t, what, err, "sqlitestore: store closed", sqlitestore.ErrClosed, bgtask.ErrClosed)
	}
}
