package memstore

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/bgtask/bgtask/bgtype"
)

// TestCommitEndMatchesCommitEdit: for every kind of live record and of
// outcome, CommitEnd either leaves the store untouched and reports false,
// or commits what CommitEdit (the reducer's way) commits: the same record,
// the same From, and the same record kept by the Task.
func TestCommitEndMatchesCommitEdit(t *testing.T) {
	ctx := context.Background()
	created := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	end := created.Add(time.Second)
	progress := &bgtype.Progress{Message: "half", At: created}
	records := map[string]bgtype.TaskMeta{
		"running":        {Status: bgtype.StatusRunning, StartedAt: created},
		"queued":         {Status: bgtype.StatusQueued},
		"described":      {Status: bgtype.StatusRunning, StartedAt: created, Description: "d"},
		"progress":       {Status: bgtype.StatusRunning, StartedAt: created, Progress: progress},
		"second attempt": {Status: bgtype.StatusRunning, StartedAt: created, Attempt: 2},
		"awaiting input": {Status: bgtype.StatusAwaitingInput, StartedAt: created, Input: &bgtype.InputRequest{ID: "in_1", Prompt: "?"}},
		"named":          {Status: bgtype.StatusRunning, StartedAt: created, Name: "n", Tags: []string{"x"}},
		"ended":          {Status: bgtype.StatusFailed, StartedAt: created, FinishedAt: created, Error: "e"},
	}
	outcomes := map[string]Outcome{
		"completed":        {Status: bgtype.StatusCompleted, Result: json.RawMessage("42"), End: end},
		"completed null":   {Status: bgtype.StatusCompleted, Result: json.RawMessage("null"), End: end},
		"completed no end": {Status: bgtype.StatusCompleted, Result: json.RawMessage(`{"a":1}`)},
		"failed":           {Status: bgtype.StatusFailed, Kind: bgtype.KindError, ErrText: "boom", End: end},
		"panicked":         {Status: bgtype.StatusFailed, Kind: bgtype.KindPanic, ErrText: "panic: x", Stack: "s", End: end},
		"cancelled":        {Status: bgtype.StatusCanceled, ErrText: "context canceled", End: end},
		"cancelled reason": {Status: bgtype.StatusCanceled, Reason: "user", ErrText: "x", End: end},
		"interrupted":      {Status: bgtype.StatusInterrupted, ErrText: "stopped", End: end},
		"with progress":    {Status: bgtype.StatusCompleted, Result: json.RawMessage("1"), End: end, Progress: &bgtype.Progress{Message: "done", At: end}},
	}
	plain := 0
	for rn, r := range records {
		for on, o := range outcomes {
			t.Run(rn+"/"+on, func(t *testing.T) {
				r.ID, r.Owner, r.Instance, r.CreatedAt = "task_1", "thread-1", "i1", created
				viaEdit, editEntry := New(), new(Entry)
				viaEnd, endEntry := New(), new(Entry)
				for _, x := range []struct {
					s *Store
					e *Entry
				}{{viaEdit, editEntry}, {viaEnd, endEntry}} {
					m := r.Clone()
					x.e.Rec.Set(&m)
					if err := x.s.CommitOne(ctx, &m, x.e); err != nil {
						t.Fatal(err)
					}
				}
				oEdit, oEnd := o, o
				var u bgtype.TaskMeta
				viaEdit.CommitEdit(&editEntry.Rec, &u, &oEdit)
				if viaEnd.CommitEnd(&endEntry.Rec, &oEnd) {
					plain++
					if oEnd.From != oEdit.From {
						t.Errorf("From %q, want %q", oEnd.From, oEdit.From)
					}
				} else {
					before, err := viaEnd.Get(ctx, r.ID)
					if err != nil {
						t.Fatal(err)
					}
					if want, _ := viaEdit.Get(ctx, r.ID); before.Status == want.Status && want.Status != r.Status {
						t.Fatalf("CommitEnd reported false but committed %s", before.Status)
					}
					var u2 bgtype.TaskMeta
					viaEnd.CommitEdit(&endEntry.Rec, &u2, &oEnd)
				}
				want, err := viaEdit.Get(ctx, r.ID)
				if err != nil {
					t.Fatal(err)
				}
				got, err := viaEnd.Get(ctx, r.ID)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("record\n got  %+v\n want %+v", got, want)
				}
				if !reflect.DeepEqual(endEntry.Rec.Expand(), editEntry.Rec.Expand()) {
					t.Errorf("the Task's record\n got  %+v\n want %+v", endEntry.Rec.Expand(), editEntry.Rec.Expand())
				}
			})
		}
	}
	// Plain: running, queued and named, each with the three completions.
	if plain != 9 {
		t.Errorf("%d plain ends, want 9", plain)
	}
}
