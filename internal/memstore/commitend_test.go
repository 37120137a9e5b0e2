package memstore

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"
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
				if viaEnd.CommitEnd(endEntry, &oEnd) {
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

// TestCommitEndOfAnEntryNoLongerKept: CommitEnd commits on an entry the
// store keeps and on nothing else: an entry a ReplaceAll took, and a live
// entry whose record already ended (the store keeps a copy), report false
// and leave the store as it was; the entry ReplaceAll kept commits.
func TestCommitEndOfAnEntryNoLongerKept(t *testing.T) {
	ctx := context.Background()
	created := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	live := func(id string) (*bgtype.TaskMeta, *Entry) {
		m := bgtype.TaskMeta{ID: id, Owner: "o", Instance: "i1", Status: bgtype.StatusRunning, CreatedAt: created, StartedAt: created}
		e := new(Entry)
		e.Rec.Set(&m)
		return &m, e
	}
	done := func() *Outcome {
		return &Outcome{Status: bgtype.StatusCompleted, Result: json.RawMessage("42"), End: created.Add(time.Second)}
	}
	s := New()
	ma, ea := live("task_a")
	mb, eb := live("task_b")
	for _, x := range []struct {
		m *bgtype.TaskMeta
		e *Entry
	}{{ma, ea}, {mb, eb}} {
		if err := s.CommitOne(ctx, x.m, x.e); err != nil {
			t.Fatal(err)
		}
	}
	// task_a stays, task_b goes.
	if err := s.Commit(ctx, "o", store.ReplaceAllAction(*ma)); err != nil {
		t.Fatal(err)
	}
	if s.CommitEnd(eb, done()) {
		t.Fatal("CommitEnd of an entry ReplaceAll took reported true")
	}
	if _, err := s.Get(ctx, "task_b"); !errors.Is(err, bgtype.ErrNotFound) {
		t.Fatalf("Get(task_b) = %v, want ErrNotFound", err)
	}
	kept := ea // ReplaceAll updates a record it keeps in its entry
	if !s.CommitEnd(kept, done()) {
		t.Fatal("CommitEnd of the kept entry reported false")
	}
	if s.CommitEnd(kept, done()) {
		t.Fatal("CommitEnd of an entry already ended reported true")
	}
	if got, err := s.Get(ctx, "task_a"); err != nil || got.Status != bgtype.StatusCompleted || string(got.Result) != "42" {
		t.Fatalf("Get(task_a) = %v %s, %v, want completed 42", got.Status, got.Result, err)
	}
}
