package storetest

import (
	"errors"
	"fmt"
	"testing"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"

	"github.com/bgtask/bgtask"
)

// sameProgress reports whether two records hold the same progress, its
// time as an instant.
func sameProgress(a, b *bgtype.Progress) bool {
	return a == nil && b == nil || a != nil && b != nil && a.Done == b.Done && a.Total == b.Total && a.Message == b.Message && a.At.Equal(b.At)
}

func fmtProgress(p *bgtype.Progress) string {
	if p == nil {
		return "nil"
	}
	return fmt.Sprintf("{%d/%d %q at %s}", p.Done, p.Total, p.Message, fmtTime(p.At))
}

// prog returns a progress of done out of total reported at at(n).
func prog(done, total int64, msg string, n int) *bgtype.Progress {
	return &bgtype.Progress{Done: done, Total: total, Message: msg, At: at(n)}
}

// testProgress: a record keeps its progress; an update without a status
// carrying progress changes only the progress of a live record (never its
// status, its input request or its other fields), an older progress never
// replaces a newer one, an update without progress keeps it, and a
// terminal record keeps the progress it ended with.
func testProgress(t *testing.T, c Config) {
	s := c.New(t)
	const a = "owner-a"
	only := func(id string, p *bgtype.Progress) bgtype.TaskMeta {
		return bgtype.TaskMeta{ID: id, Owner: a, Progress: p}
	}
	described := func(m bgtype.TaskMeta) bgtype.TaskMeta { m.Description = "indexing"; return m }
	live := described(rec("task_1", a, bgtype.StatusRunning, 1))
	live.Progress = prog(1, 10, "ünï \"q\" <x>", 1)
	commit(t, s, a, store.UpsertAction(live))
	asking := rec("task_2", a, bgtype.StatusRunning, 2)
	asking.Input = &bgtype.InputRequest{ID: "input_1", Prompt: "which?"}
	commit(t, s, a, store.UpsertAction(asking))
	commit(t, s, a, store.UpsertAction(ended(rec("task_3", a, bgtype.StatusRunning, 3), bgtype.StatusCompleted, 4)))

	steps := []struct {
		name   string
		update bgtype.TaskMeta
		id     string
		want   *bgtype.Progress
		status bgtype.Status
	}{
		{"stored at insert", live, "task_1", prog(1, 10, "ünï \"q\" <x>", 1), bgtype.StatusRunning},
		{"newer without status", only("task_1", prog(5, 10, "half", 3)), "task_1", prog(5, 10, "half", 3), bgtype.StatusRunning},
		{"older dropped", only("task_1", prog(9, 10, "stale", 2)), "task_1", prog(5, 10, "half", 3), bgtype.StatusRunning},
		{"same time replaces", only("task_1", prog(6, 0, "", 3)), "task_1", prog(6, 0, "", 3), bgtype.StatusRunning},
		{"update without progress keeps it", described(rec("task_1", a, bgtype.StatusRunning, 1)), "task_1", prog(6, 0, "", 3), bgtype.StatusRunning},
		{"awaiting input stays so", only("task_2", prog(2, 3, "waiting", 4)), "task_2", prog(2, 3, "waiting", 4), bgtype.StatusAwaitingInput},
		{"terminal with the last progress", func() bgtype.TaskMeta {
			m := ended(described(rec("task_1", a, bgtype.StatusRunning, 1)), bgtype.StatusCompleted, 6)
			m.Progress = prog(10, 10, "done", 5)
			return m
		}(), "task_1", prog(10, 10, "done", 5), bgtype.StatusCompleted},
		{"terminal keeps its progress", only("task_1", prog(3, 10, "late", 9)), "task_1", prog(10, 10, "done", 5), bgtype.StatusCompleted},
		{"terminal without progress is filled", only("task_3", prog(7, 0, "last", 5)), "task_3", prog(7, 0, "last", 5), bgtype.StatusCompleted},
	}
	for _, st := range steps {
		commit(t, s, a, store.UpsertAction(st.update))
		got := get(t, s, st.id)
		if !sameProgress(got.Progress, st.want) || got.Status != st.status {
			t.Errorf("%s: %s has progress %s, status %s; want %s, %s", st.name, st.id, fmtProgress(got.Progress), got.Status, fmtProgress(st.want), st.status)
		}
	}
	if got := get(t, s, "task_1"); got.Description != "indexing" {
		t.Errorf("task_1 description = %q after progress updates, want %q", got.Description, "indexing")
	}
	if got := get(t, s, "task_2"); got.Input == nil || got.Input.ID != "input_1" {
		t.Errorf("task_2 input request = %+v after a progress update, want input_1", got.Input)
	}
	if got := load(t, s, a).Tasks["task_2"].Progress; !sameProgress(got, prog(2, 3, "waiting", 4)) {
		t.Errorf("Load: task_2 progress = %s", fmtProgress(got))
	}
	// An update without status of a record the store does not hold inserts nothing.
	commit(t, s, a, store.UpsertAction(only("task_9", prog(1, 0, "", 1))))
	if _, err := s.Get(t.Context(), "task_9"); !errors.Is(err, bgtask.ErrNotFound) {
		t.Errorf("Get(task_9) after a progress-only upsert of an unknown id: %v, want ErrNotFound", err)
	}
	// A progress no task could report is refused.
	bad := rec("task_8", a, bgtype.StatusRunning, 1)
	bad.Progress = prog(5, 3, "", 1)
	wantErr(t, "Commit of done > total", s.Commit(t.Context(), a, store.UpsertAction(bad)), store.ErrInvalidAction)
}

// testIdempotencyKeys: an owner's idempotency key is on one record at a
// time. A commit that would insert a second record with it fails with a
// *bgtype.DuplicateKeyError naming the first and changes nothing; another
// owner's keys are separate; updates of the record itself are not
// conflicts and never change its key; once the record is removed the key
// is free.
func testIdempotencyKeys(t *testing.T, c Config) {
	s := c.New(t)
	const a, b = "owner-a", "owner-b"
	keyed := func(m bgtype.TaskMeta, key string) bgtype.TaskMeta { m.IdempotencyKey = key; return m }
	commit(t, s, a, store.UpsertAction(keyed(rec("task_1", a, bgtype.StatusRunning, 1), "k1")))
	if got := get(t, s, "task_1").IdempotencyKey; got != "k1" {
		t.Fatalf("Get(task_1).IdempotencyKey = %q, want k1", got)
	}
	wantDup := func(what string, err error, id string) {
		t.Helper()
		var dup *bgtype.DuplicateKeyError
		if !errors.Is(err, bgtype.ErrDuplicateKey) || !errors.As(err, &dup) || dup.TaskID != id || dup.Key != "k1" {
			t.Errorf("%s: %v, want a *DuplicateKeyError for k1 naming %s", what, err, id)
		}
	}
	wantDup("second record with the key", s.Commit(t.Context(), a, store.UpsertAction(keyed(rec("task_2", a, bgtype.StatusRunning, 2), "k1"))), "task_1")
	wantDup("with another action", s.Commit(t.Context(), a,
		store.UpsertAction(rec("task_3", a, bgtype.StatusRunning, 3)),
		store.UpsertAction(keyed(rec("task_2", a, bgtype.StatusQueued, 2), "k1"))), "task_1")
	for _, id := range []string{"task_2", "task_3"} {
		if _, err := s.Get(t.Context(), id); !errors.Is(err, bgtask.ErrNotFound) {
			t.Errorf("Get(%s) after a refused commit: %v, want ErrNotFound", id, err)
		}
	}
	// Other owners, other keys, no key: no conflict.
	commit(t, s, b, store.UpsertAction(keyed(rec("task_b", b, bgtype.StatusRunning, 1), "k1")))
	commit(t, s, a, store.UpsertAction(keyed(rec("task_4", a, bgtype.StatusRunning, 4), "K1")))
	commit(t, s, a, store.UpsertAction(rec("task_5", a, bgtype.StatusRunning, 5)), store.UpsertAction(rec("task_6", a, bgtype.StatusRunning, 6)))
	// Updates of the record itself, even carrying another key, keep it.
	commit(t, s, a, store.UpsertAction(keyed(rec("task_1", a, bgtype.StatusRunning, 1), "k1")))
	commit(t, s, a, store.UpsertAction(keyed(ended(rec("task_1", a, bgtype.StatusRunning, 1), bgtype.StatusCompleted, 7), "other")))
	if got := get(t, s, "task_1"); got.IdempotencyKey != "k1" || got.Status != bgtype.StatusCompleted {
		t.Errorf("task_1 after updates: key %q, status %s; want k1, completed", got.IdempotencyKey, got.Status)
	}
	// A terminal record still holds its key; once removed, the key is free.
	wantDup("key of a terminal record", s.Commit(t.Context(), a, store.UpsertAction(keyed(rec("task_2", a, bgtype.StatusRunning, 2), "k1"))), "task_1")
	commit(t, s, a, store.RemoveAction("task_1"))
	commit(t, s, a, store.UpsertAction(keyed(rec("task_2", a, bgtype.StatusRunning, 2), "k1")))
	if got := get(t, s, "task_2").IdempotencyKey; got != "k1" {
		t.Errorf("Get(task_2).IdempotencyKey = %q, want k1", got)
	}
	if got := get(t, s, "task_b").IdempotencyKey; got != "k1" {
		t.Errorf("Get(task_b).IdempotencyKey = %q, want k1", got)
	}
}
