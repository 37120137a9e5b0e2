package store

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/bgtask/bgtask/bgtype"
)

// kindRec is the running record of a resumable task on its first attempt.
func kindRec() bgtype.TaskMeta {
	return bgtype.TaskMeta{
		ID: "task_k", Owner: "o", Status: bgtype.StatusRunning, CreatedAt: rt0, StartedAt: rt0, Instance: "inst-a", Attempt: 1,
		Resume: &bgtype.Resume{Kind: "crawl/v1", Spec: json.RawMessage(`{"url":"x"}`), MaxAttempts: 3},
	}
}

func applied(t *testing.T, acts ...Action) bgtype.TaskMeta {
	t.Helper()
	var s Snapshot
	for _, a := range acts {
		Apply(&s, a)
	}
	return s.Tasks["task_k"]
}

func TestApplyRequeueOnlyKinds(t *testing.T) {
	t.Parallel()
	k := kindRec()
	q := Requeued(k, rt1, "gone", false)
	got := applied(t, UpsertAction(k), UpsertAction(q))
	if got.Status != bgtype.StatusQueued || got.Attempt != 2 || got.Instance != "" || got.Resume.LastError != "gone" || !got.Resume.QueuedAt.Equal(rt1) {
		t.Fatalf("requeued = %+v %+v", got, got.Resume)
	}
	// a closure's record never goes back to the queue
	c := k
	c.Resume = nil
	back := c
	back.Status, back.Attempt = bgtype.StatusQueued, 2
	if got := applied(t, UpsertAction(c), UpsertAction(back)); got.Status != bgtype.StatusRunning || got.Attempt != 1 {
		t.Fatalf("closure requeued: %+v", got)
	}
	// a requeue on the same attempt is dropped
	same := q
	same.Attempt = 1
	if got := applied(t, UpsertAction(k), UpsertAction(same)); got.Status != bgtype.StatusRunning {
		t.Fatalf("same-attempt requeue landed: %+v", got)
	}
}

func TestApplyClaimOnce(t *testing.T) {
	t.Parallel()
	q := Requeued(kindRec(), rt1, "gone", false)
	claim := func(inst string) Action {
		c := q
		c.Status, c.Instance = bgtype.StatusRunning, inst
		return UpsertAction(c)
	}
	got := applied(t, UpsertAction(kindRec()), UpsertAction(q), claim("inst-b"), claim("inst-c"))
	if got.Status != bgtype.StatusRunning || got.Instance != "inst-b" || got.Attempt != 2 {
		t.Fatalf("after two claims: %+v", got)
	}
	// the loser's end is dropped too
	end := q
	end.Status, end.Instance, end.Result = bgtype.StatusCompleted, "inst-c", json.RawMessage(`1`)
	got = applied(t, UpsertAction(kindRec()), UpsertAction(q), claim("inst-b"), UpsertAction(end))
	if got.Status != bgtype.StatusRunning {
		t.Fatalf("loser's end landed: %+v", got)
	}
}

func TestApplyCheckpointFenced(t *testing.T) {
	t.Parallel()
	k := kindRec()
	save := k
	save.Status = ""
	save.Resume = k.Resume.Clone()
	save.Resume.Checkpoint, save.Resume.SavedAt, save.Resume.SavedBy = json.RawMessage(`{"page":4}`), rt1, 1
	got := applied(t, UpsertAction(k), UpsertAction(save))
	if string(got.Resume.Checkpoint) != `{"page":4}` || got.Resume.SavedBy != 1 {
		t.Fatalf("save: %+v", got.Resume)
	}
	// attempt 1 superseded by attempt 2: its save changes nothing
	q := Requeued(got, rt2, "gone", false)
	late := save
	late.Resume = save.Resume.Clone()
	late.Resume.Checkpoint, late.Resume.SavedAt = json.RawMessage(`{"page":9}`), rt2
	got = applied(t, UpsertAction(k), UpsertAction(save), UpsertAction(q), UpsertAction(late))
	if string(got.Resume.Checkpoint) != `{"page":4}` || got.Status != bgtype.StatusQueued || got.Attempt != 2 {
		t.Fatalf("superseded save landed: %+v %+v", got, got.Resume)
	}
	// an update that read the record before a save does not take it back
	stale := k
	stale.Status = ""
	stale.Description = "later"
	got = applied(t, UpsertAction(k), UpsertAction(save), UpsertAction(stale))
	if string(got.Resume.Checkpoint) != `{"page":4}` || got.Description != "later" {
		t.Fatalf("stale write took the checkpoint back: %+v", got.Resume)
	}
	// Kind, Spec and MaxAttempts never change
	other := save
	other.Resume = save.Resume.Clone()
	other.Resume.Kind, other.Resume.Spec, other.Resume.MaxAttempts = "x/v2", json.RawMessage(`{}`), 9
	got = applied(t, UpsertAction(k), UpsertAction(other))
	if got.Resume.Kind != "crawl/v1" || string(got.Resume.Spec) != `{"url":"x"}` || got.Resume.MaxAttempts != 3 {
		t.Fatalf("identity changed: %+v", got.Resume)
	}
}

func TestOrphaned(t *testing.T) {
	t.Parallel()
	at := rt2
	k := kindRec()
	if got := Orphaned(k, at); got.Status != bgtype.StatusQueued || got.Attempt != 2 || got.Instance != "" ||
		got.Resume.LastError != `the runtime that ran it (instance "inst-a") is gone` {
		t.Fatalf("Orphaned(first attempt) = %+v %+v", got, got.Resume)
	}
	last := k
	last.Attempt = 3
	last.Resume = k.Resume.Clone()
	last.Resume.Checkpoint, last.Resume.SavedBy, last.Resume.SavedAt = json.RawMessage(`1`), 3, time.Date(2026, 1, 2, 13, 58, 0, 0, time.UTC)
	got := Orphaned(last, at)
	want := `bgtask: interrupted: gave up after 3 attempts (kind crawl/v1): the runtime that ran it (instance "inst-a") is gone; its last checkpoint was saved by attempt 3 at 2026-01-02T13:58:00Z`
	if got.Status != bgtype.StatusInterrupted || got.Attempt != 4 || got.Error != want || got.ErrorKind != bgtype.KindInterrupted {
		t.Fatalf("Orphaned(last attempt) = %q %+v", got.Error, got)
	}
	// a yield costs no attempt
	y := Requeued(k, at, "stop", true)
	y.Status, y.Instance, y.Attempt = bgtype.StatusRunning, "inst-b", 3 // attempt 2 yielded; 3 is the second counted
	if got := Orphaned(y, at); got.Status != bgtype.StatusQueued {
		t.Fatalf("Orphaned after a yield = %+v", got)
	}
	c := k
	c.Resume = nil
	if got := Orphaned(c, at); got.Status != bgtype.StatusInterrupted || !strings.Contains(got.Error, "will not be re-run") {
		t.Fatalf("Orphaned(closure) = %+v", got)
	}
	if !Waiting(&[]bgtype.TaskMeta{Requeued(k, at, "", false)}[0]) || Waiting(&k) {
		t.Fatal("Waiting")
	}
}
