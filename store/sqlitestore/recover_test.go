package sqlitestore_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/store/sqlitestore"
)

// interruptedText is the error of a record that recovery interrupted.
func interruptedText(instance string) string {
	return fmt.Sprintf("bgtask: interrupted: the runtime that ran it (instance %q) is gone; it will not be re-run", instance)
}

// Opening a database that no other process has open interrupts every live
// record a gone process left, for every owner and in several batches;
// terminal records stay as they were, and nothing is announced.
func TestRecoverAtOpen(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "tasks.db")
	s1, err := sqlitestore.Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	var actions []store.Action
	const many = 620 // more than one batch
	for n := range many {
		actions = append(actions, store.UpsertAction(rec("alice", n, bgtype.StatusRunning)))
	}
	commit(t, s1, "alice", actions...)
	queued := rec("bob", 1, bgtype.StatusQueued)
	queued.Instance = "inst-b"
	done := rec("bob", 2, bgtype.StatusCompleted)
	commit(t, s1, "bob", store.UpsertAction(queued), store.UpsertAction(done))
	if err := s1.Close(); err != nil {
		t.Fatal(err)
	}

	s2 := openAt(t, path)
	for _, id := range []string{"task_alice_00", fmt.Sprintf("task_alice_%02d", many-1), queued.ID} {
		got := get(t, s2, id)
		inst := "inst-a"
		if id == queued.ID {
			inst = "inst-b"
		}
		if got.Status != bgtype.StatusInterrupted || got.ErrorKind != bgtype.KindInterrupted || got.Attempt != 1 ||
			got.Error != interruptedText(inst) || got.Announced || got.FinishedAt.IsZero() {
			t.Errorf("%s after recovery = %s kind %q attempt %d announced %v error %q", id, got.Status, got.ErrorKind, got.Attempt, got.Announced, got.Error)
		}
	}
	n := 0
	for m, err := range s2.List(t.Context(), "alice", bgtype.StatusInterrupted) {
		if err != nil {
			t.Fatal(err)
		}
		n++
		_ = m
	}
	if n != many {
		t.Errorf("%d of alice's records interrupted, want %d", n, many)
	}
	if got := get(t, s2, done.ID); got.Status != bgtype.StatusCompleted || got.Attempt != 0 {
		t.Errorf("completed record changed: %s attempt %d", got.Status, got.Attempt)
	}
}

// While another Store has the database open, its records may be live:
// opening leaves them alone and Recover refuses with ErrShared; once it is
// closed, Recover interrupts them. A Store never recovers the records of
// the instances that committed through it.
func TestRecoverLeavesLiveProcess(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "tasks.db")
	s1, err := sqlitestore.Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	live := rec("alice", 1, bgtype.StatusRunning)
	commit(t, s1, "alice", store.UpsertAction(live))
	if n, err := s1.InterruptOrphaned(t.Context()); n != 0 || err != nil {
		t.Fatalf("Recover of its own instance's records = %d, %v; want 0, nil", n, err)
	}

	s2 := openAt(t, path)
	if got := get(t, s2, live.ID); got.Status != bgtype.StatusRunning {
		t.Fatalf("a second Open interrupted a live process's record: %s", got.Status)
	}
	m, err := bgtask.New(bgtask.WithStore(s2))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Shutdown(t.Context()) })
	if n, err := m.InterruptOrphaned(t.Context()); n != 0 || !errors.Is(err, sqlitestore.ErrShared) {
		t.Fatalf("Manager.Recover while shared = %d, %v; want 0, ErrShared", n, err)
	}
	if got := get(t, s2, live.ID); got.Status != bgtype.StatusRunning {
		t.Fatalf("Recover while shared interrupted a live record: %s", got.Status)
	}

	if err := s1.Close(); err != nil {
		t.Fatal(err)
	}
	if n, err := m.InterruptOrphaned(t.Context()); n != 1 || err != nil {
		t.Fatalf("Manager.Recover once alone = %d, %v; want 1, nil", n, err)
	}
	if got := get(t, s2, live.ID); got.Status != bgtype.StatusInterrupted || got.Error != interruptedText("inst-a") {
		t.Fatalf("record after Recover = %s %q", got.Status, got.Error)
	}
}
