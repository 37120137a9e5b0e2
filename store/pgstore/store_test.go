package pgstore_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/store/pgstore"
)

var t0 = time.Date(2025, 1, 2, 3, 4, 5, 6000, time.UTC)

func rec(id, owner string, st bgtype.Status) bgtype.TaskMeta {
	m := bgtype.TaskMeta{ID: id, Owner: owner, Status: st, Type: "tool", CreatedAt: t0, Instance: "i1"}
	if st != bgtype.StatusQueued {
		m.StartedAt = t0.Add(time.Second)
	}
	if st.IsTerminal() {
		m.FinishedAt = t0.Add(2 * time.Second)
	}
	return m
}

func TestCommitRoundTrip(t *testing.T) {
	t.Parallel()
	s, _ := openStore(t)
	ctx := t.Context()
	full := bgtype.TaskMeta{
		ID: "task_full", Owner: "alice", Type: "agent", Name: "n1", Description: "d",
		Status: bgtype.StatusAwaitingInput, Stack: "", CreatedAt: t0, StartedAt: t0.Add(time.Second),
		Parent:   bgtype.Parent{TaskID: "task_p", RunID: "run", CallID: "call", AgentID: "agent"},
		Detached: true, Instance: "i1", Attempt: 2, Wake: bgtype.WakeSilent,
		Input: &bgtype.InputRequest{ID: "input_1", Prompt: "why?"},
	}
	done := rec("task_done", "alice", bgtype.StatusCompleted)
	done.Result = json.RawMessage(`{"b":1,"a":[1,2]}`)
	if err := s.Commit(ctx, "alice", store.UpsertAction(full), store.UpsertAction(done)); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	got, err := s.Get(ctx, "task_full")
	if err != nil || !reflect.DeepEqual(got, full) {
		t.Fatalf("Get = %+v, %v\nwant %+v", got, err, full)
	}
	snap, err := s.Load(ctx, "alice")
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	want := map[string]bgtype.TaskMeta{"task_full": full, "task_done": done}
	if !reflect.DeepEqual(snap.Tasks, want) {
		t.Fatalf("Load = %+v\nwant %+v", snap.Tasks, want)
	}
	if _, err := s.Get(ctx, "task_nope"); !errors.Is(err, bgtask.ErrNotFound) {
		t.Fatalf("Get unknown: %v, want ErrNotFound", err)
	}
	// The reducer runs in the transaction: a terminal record is final.
	again := done
	again.Status, again.Result = bgtype.StatusFailed, nil
	if err := s.Commit(ctx, "alice", store.UpsertAction(again)); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	if got, _ := s.Get(ctx, "task_done"); !reflect.DeepEqual(got, done) {
		t.Fatalf("terminal record changed: %+v", got)
	}
	// Another owner cannot take over the id.
	if err := s.Commit(ctx, "bob", store.UpsertAction(rec("task_done", "bob", bgtype.StatusRunning))); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	if got, _ := s.Get(ctx, "task_done"); got.Owner != "alice" {
		t.Fatalf("owner moved: %+v", got)
	}
	var listed []string
	for m, err := range s.List(ctx, "alice", bgtype.StatusCompleted) {
		if err != nil {
			t.Fatal(err)
		}
		listed = append(listed, m.ID)
	}
	if !reflect.DeepEqual(listed, []string{"task_done"}) {
		t.Fatalf("List = %v", listed)
	}
	var kids []string
	for m, err := range s.Children(ctx, "task_p") {
		if err != nil {
			t.Fatal(err)
		}
		kids = append(kids, m.ID)
	}
	if !reflect.DeepEqual(kids, []string{"task_full"}) {
		t.Fatalf("Children = %v", kids)
	}
	for _, err := range s.List(ctx, "alice", "bogus") {
		if !errors.Is(err, bgtype.ErrInvalidStatus) {
			t.Fatalf("List(bogus) = %v", err)
		}
	}
}

func TestCommitInvalidChangesNothing(t *testing.T) {
	t.Parallel()
	s, _ := openStore(t)
	ctx := t.Context()
	good := rec("task_a", "alice", bgtype.StatusRunning)
	tests := []struct {
		name    string
		owner   string
		actions []store.Action
		want    string
	}{
		{"other owner", "alice", []store.Action{store.UpsertAction(good), store.UpsertAction(rec("task_b", "bob", bgtype.StatusRunning))}, `task task_b belongs to owner "bob", not "alice"`},
		{"unknown status", "alice", []store.Action{store.UpsertAction(good), store.UpsertAction(rec("task_b", "alice", "bogus"))}, `task task_b: unknown status "bogus"`},
		{"bad result", "alice", []store.Action{store.UpsertAction(bgtype.TaskMeta{ID: "task_c", Owner: "alice", Status: bgtype.StatusCompleted, Result: json.RawMessage("{")})}, "task task_c: result is not valid JSON"},
		{"unknown op", "alice", []store.Action{{Op: "drop"}}, `unknown op "drop"`},
		{"blank owner", " ", []store.Action{store.UpsertAction(good)}, "owner id is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := s.Commit(ctx, tt.owner, tt.actions...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Commit = %v, want %q", err, tt.want)
			}
			if snap, err := s.Load(ctx, "alice"); err != nil || len(snap.Tasks) != 0 {
				t.Fatalf("Load after refused commit = %v, %v", snap.Tasks, err)
			}
		})
	}
}

func TestReplaceAllAndRemove(t *testing.T) {
	t.Parallel()
	s, _ := openStore(t)
	ctx := t.Context()
	a, b, c := rec("task_a", "o", bgtype.StatusCompleted), rec("task_b", "o", bgtype.StatusRunning), rec("task_c", "o", bgtype.StatusRunning)
	if err := s.Commit(ctx, "o", store.ReplaceAllAction(a, b)); err != nil {
		t.Fatal(err)
	}
	b2 := b
	b2.Status = bgtype.StatusCompleted
	b2.FinishedAt = t0.Add(3 * time.Second)
	if err := s.Commit(ctx, "o", store.ReplaceAllAction(b2, c)); err != nil {
		t.Fatal(err)
	}
	snap, err := s.Load(ctx, "o")
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]bgtype.TaskMeta{"task_b": b2, "task_c": c}; !reflect.DeepEqual(snap.Tasks, want) {
		t.Fatalf("after ReplaceAll: %+v", snap.Tasks)
	}
	if err := s.Commit(ctx, "o", store.RemoveAction("task_b", "task_c")); err != nil {
		t.Fatal(err)
	}
	snap, _ = s.Load(ctx, "o")
	if _, ok := snap.Tasks["task_b"]; ok || len(snap.Tasks) != 1 {
		t.Fatalf("after Remove: %+v (a live task must stay, the terminal one go)", snap.Tasks)
	}
}

func TestRetainPerOwner(t *testing.T) {
	t.Parallel()
	s, _ := openStore(t, pgstore.WithRetainPerOwner(2))
	ctx := t.Context()
	for _, id := range []string{"task_1", "task_2", "task_3"} {
		if err := s.Commit(ctx, "o", store.UpsertAction(rec(id, "o", bgtype.StatusCompleted))); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Commit(ctx, "o", store.UpsertAction(rec("task_live", "o", bgtype.StatusRunning))); err != nil {
		t.Fatal(err)
	}
	snap, _ := s.Load(ctx, "o")
	var ids []string
	for id := range snap.Tasks {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	if !reflect.DeepEqual(ids, []string{"task_2", "task_3", "task_live"}) {
		t.Fatalf("kept %v", ids)
	}
}
