package memstore

import (
	"context"
	"encoding/json"
	"errors"
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

// TestCommitNewMatchesCommitOne: for every kind of new record, CommitNew
// either leaves the store untouched and reports false, or stores what
// CommitOne of the record expanded stores.
func TestCommitNewMatchesCommitOne(t *testing.T) {
	ctx := context.Background()
	created := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	records := map[string]bgtype.TaskMeta{
		"running":     {Status: bgtype.StatusRunning, StartedAt: created},
		"not started": {Status: bgtype.StatusRunning},
		"queued":      {Status: bgtype.StatusQueued},
		"named":       {Status: bgtype.StatusRunning, StartedAt: created, Name: "n", Tags: []string{"x"}, Parent: bgtype.Parent{TaskID: "task_0"}},
		"described":   {Status: bgtype.StatusRunning, StartedAt: created, Description: "d"},
		"keyed":       {Status: bgtype.StatusRunning, StartedAt: created, IdempotencyKey: "k"},
		"input":       {Status: bgtype.StatusRunning, StartedAt: created, Input: &bgtype.InputRequest{ID: "in_1", Prompt: "?"}},
		"completed":   {Status: bgtype.StatusCompleted, StartedAt: created, FinishedAt: created, Result: json.RawMessage("1")},
		"announced":   {Status: bgtype.StatusRunning, StartedAt: created, Announced: true},
	}
	fast := 0
	for name, r := range records {
		t.Run(name, func(t *testing.T) {
			r.ID, r.Owner, r.Instance, r.CreatedAt = "task_1", "thread-1", "i1", created
			viaOne, oneEntry := New(), new(Entry)
			m := r.Clone()
			oneEntry.Rec.Set(&m)
			if err := viaOne.CommitOne(ctx, &m, oneEntry); err != nil {
				t.Fatal(err)
			}
			viaNew, newEntry := New(), new(Entry)
			m = r.Clone()
			newEntry.Rec.Set(&m)
			ok, err := viaNew.CommitNew(ctx, newEntry)
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				fast++
			} else {
				if _, err := viaNew.Get(ctx, r.ID); err == nil {
					t.Fatal("CommitNew reported false but stored the record")
				}
				if err := viaNew.CommitOne(ctx, &m, newEntry); err != nil {
					t.Fatal(err)
				}
			}
			want, err := viaOne.Get(ctx, r.ID)
			if err != nil {
				t.Fatal(err)
			}
			got, err := viaNew.Get(ctx, r.ID)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("record\n got  %+v\n want %+v", got, want)
			}
			if !reflect.DeepEqual(newEntry.Rec.Expand(), oneEntry.Rec.Expand()) {
				t.Errorf("the Task's record\n got  %+v\n want %+v", newEntry.Rec.Expand(), oneEntry.Rec.Expand())
			}
		})
	}
	if fast != 4 { // running, not started, queued, named
		t.Errorf("%d records took the fast way, want 4", fast)
	}
	// An id in the store already is CommitOne's to settle.
	s, e := New(), new(Entry)
	m := bgtype.TaskMeta{ID: "task_1", Owner: "thread-1", Status: bgtype.StatusRunning, CreatedAt: created}
	e.Rec.Set(&m)
	if ok, err := s.CommitNew(ctx, e); !ok || err != nil {
		t.Fatalf("first CommitNew: %v %v, want true", ok, err)
	}
	e2 := new(Entry)
	e2.Rec.Set(&m)
	if ok, err := s.CommitNew(ctx, e2); ok || err != nil {
		t.Fatalf("CommitNew of an id stored already: %v %v, want false, nil", ok, err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if ok, err := New().CommitNew(cancelled, e2); ok || !errors.Is(err, context.Canceled) {
		t.Fatalf("CommitNew with a cancelled context: %v %v, want false, context.Canceled", ok, err)
	}
}
