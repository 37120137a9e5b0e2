package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"
)

// t0 is the base of every timestamp: UTC, microsecond precision, as stores
// keep them (docs/decisions.md, entry 14).
var t0 = time.Date(2025, time.March, 14, 9, 26, 53, 589793000, time.UTC)

// at returns t0 plus n minutes and n microseconds, so stamps differ in
// both their coarse and their finest kept digits.
func at(n int) time.Time {
	return t0.Add(time.Duration(n)*time.Minute + time.Duration(n)*time.Microsecond)
}

// rec returns a minimal valid record created at at(created).
func rec(id, owner string, st bgtype.Status, created int) bgtype.TaskMeta {
	return bgtype.TaskMeta{ID: id, Owner: owner, Status: st, CreatedAt: at(created)}
}

// ended returns m moved to the terminal status st, finished at at(n).
func ended(m bgtype.TaskMeta, st bgtype.Status, n int) bgtype.TaskMeta {
	m.Status, m.FinishedAt = st, at(n)
	if m.StartedAt.IsZero() {
		m.StartedAt = at(n)
	}
	return m
}

func commit(t *testing.T, s store.Store, owner string, actions ...store.Action) {
	t.Helper()
	if err := s.Commit(t.Context(), owner, actions...); err != nil {
		t.Fatalf("Commit(%q, %s): %v", owner, describe(actions), err)
	}
}

func get(t *testing.T, s store.Store, id string) bgtype.TaskMeta {
	t.Helper()
	m, err := s.Get(t.Context(), id)
	if err != nil {
		t.Fatalf("Get(%q): %v", id, err)
	}
	return m
}

func load(t *testing.T, s store.Store, owner string) store.Snapshot {
	t.Helper()
	snap, err := s.Load(t.Context(), owner)
	if err != nil {
		t.Fatalf("Load(%q): %v", owner, err)
	}
	return snap
}

// collect drains seq. It returns the records before the first error, that
// error, and how many pairs followed it (a conforming store yields none).
func collect(seq iter.Seq2[bgtype.TaskMeta, error]) (ms []bgtype.TaskMeta, err error, after int) {
	for m, e := range seq {
		switch {
		case err != nil:
			after++
		case e != nil:
			err = e
		default:
			ms = append(ms, m)
		}
	}
	return ms, err, after
}

// list collects seq and fails t on any error.
func list(t *testing.T, what string, seq iter.Seq2[bgtype.TaskMeta, error]) []bgtype.TaskMeta {
	t.Helper()
	ms, err, _ := collect(seq)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return ms
}

func idsOf(ms []bgtype.TaskMeta) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	return out
}

func snapIDs(s store.Snapshot) []string {
	return slices.Sorted(maps.Keys(s.Tasks))
}

// wantIDs fails t unless got is want, in order.
func wantIDs(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s = %q, want %q", what, got, want)
	}
}

// oracle is the expected state: each owner's snapshot reduced with
// store.Apply, the one reducer every store must apply.
type oracle map[string]*store.Snapshot

func (o oracle) apply(owner string, actions ...store.Action) {
	s := o[owner]
	if s == nil {
		s = &store.Snapshot{Tasks: map[string]bgtype.TaskMeta{}}
		o[owner] = s
	}
	for _, a := range actions {
		store.Apply(s, a)
	}
}

// commitBoth commits actions to the store and to the oracle.
func (o oracle) commitBoth(t *testing.T, s store.Store, owner string, actions ...store.Action) {
	t.Helper()
	commit(t, s, owner, actions...)
	o.apply(owner, actions...)
}

// check fails t unless Load(owner), Get of each record and List(owner)
// agree with the oracle.
func (o oracle) check(t *testing.T, s store.Store, owner, step string) {
	t.Helper()
	want := store.Snapshot{Tasks: map[string]bgtype.TaskMeta{}}
	if w := o[owner]; w != nil {
		want = *w
	}
	got := load(t, s, owner)
	if d := diffSnap(want, got); d != "" {
		t.Errorf("after %s: Load(%q) differs from the reducer's snapshot:\n%s", step, owner, d)
	}
	for _, id := range snapIDs(want) {
		m, err := s.Get(t.Context(), id)
		if err != nil {
			t.Errorf("after %s: Get(%q): %v", step, id, err)
			continue
		}
		if d := diffMeta(want.Tasks[id], m); d != "" {
			t.Errorf("after %s: Get(%q) differs from the reducer's record:\n%s", step, id, d)
		}
	}
	ms := list(t, fmt.Sprintf("after %s: List(%q)", step, owner), s.List(t.Context(), owner))
	wantList := slices.Collect(maps.Values(want.Tasks))
	store.SortMetas(wantList)
	wantIDs(t, fmt.Sprintf("after %s: List(%q) ids", step, owner), idsOf(ms), idsOf(wantList))
}

// diffSnap describes how got differs from want, or returns "".
func diffSnap(want, got store.Snapshot) string {
	var b strings.Builder
	if got.Tasks == nil {
		b.WriteString("  Tasks is nil, want a map (possibly empty)\n")
	}
	for _, id := range snapIDs(want) {
		g, ok := got.Tasks[id]
		if !ok {
			fmt.Fprintf(&b, "  %s: missing\n", id)
			continue
		}
		if d := diffMeta(want.Tasks[id], g); d != "" {
			fmt.Fprintf(&b, "  %s:\n%s", id, d)
		}
	}
	for _, id := range snapIDs(got) {
		if _, ok := want.Tasks[id]; !ok {
			fmt.Fprintf(&b, "  %s: unexpected record (status %s)\n", id, got.Tasks[id].Status)
		}
		if k := got.Tasks[id].ID; k != id {
			fmt.Fprintf(&b, "  %s: kept under key %q\n", k, id)
		}
	}
	return b.String()
}

// diffMeta describes every field in which got differs from want, or
// returns "". Times must be equal instants (RoundTrip also checks that they
// are in UTC); results must be equal JSON values (a store may reformat
// them, as jsonb does).
func diffMeta(want, got bgtype.TaskMeta) string {
	var b strings.Builder
	field := func(name string, w, g any) {
		if !reflect.DeepEqual(w, g) {
			fmt.Fprintf(&b, "    %s = %#v, want %#v\n", name, g, w)
		}
	}
	stamp := func(name string, w, g time.Time) {
		if !w.Equal(g) {
			fmt.Fprintf(&b, "    %s = %s, want %s\n", name, fmtTime(g), fmtTime(w))
		}
	}
	field("ID", want.ID, got.ID)
	field("Owner", want.Owner, got.Owner)
	field("Type", want.Type, got.Type)
	field("Name", want.Name, got.Name)
	field("Description", want.Description, got.Description)
	field("Status", want.Status, got.Status)
	field("Error", want.Error, got.Error)
	field("ErrorKind", want.ErrorKind, got.ErrorKind)
	field("CancelReason", want.CancelReason, got.CancelReason)
	field("Stack", want.Stack, got.Stack)
	if !sameJSON(want.Result, got.Result) {
		fmt.Fprintf(&b, "    Result = %s, want %s\n", showRaw(got.Result), showRaw(want.Result))
	}
	stamp("CreatedAt", want.CreatedAt, got.CreatedAt)
	stamp("StartedAt", want.StartedAt, got.StartedAt)
	stamp("FinishedAt", want.FinishedAt, got.FinishedAt)
	field("Parent", want.Parent, got.Parent)
	field("Detached", want.Detached, got.Detached)
	field("Instance", want.Instance, got.Instance)
	field("Attempt", want.Attempt, got.Attempt)
	field("Wake", want.Wake, got.Wake)
	field("Input", want.Input, got.Input)
	field("MoreInput", want.MoreInput, got.MoreInput)
	if !slices.Equal(want.Tags, got.Tags) {
		fmt.Fprintf(&b, "    Tags = %q, want %q\n", got.Tags, want.Tags)
	}
	// Progress and idempotency keys.
	if !sameProgress(want.Progress, got.Progress) {
		fmt.Fprintf(&b, "    Progress = %s, want %s\n", fmtProgress(got.Progress), fmtProgress(want.Progress))
	}
	field("IdempotencyKey", want.IdempotencyKey, got.IdempotencyKey)
	field("Announced", want.Announced, got.Announced) // durable announcements
	field("OutputBytes", want.OutputBytes, got.OutputBytes)
	if d := diffResume(want.Resume, got.Resume); d != "" {
		fmt.Fprintf(&b, "    Resume: %s\n", d)
	}
	return b.String()
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "zero"
	}
	return t.Format(time.RFC3339Nano)
}

func showRaw(r json.RawMessage) string {
	if r == nil {
		return "nil"
	}
	return fmt.Sprintf("%q", []byte(r))
}

// sameJSON reports whether a and b are both absent or encode equal values.
func sameJSON(a, b json.RawMessage) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	va, erra := decodeJSON(a)
	vb, errb := decodeJSON(b)
	if erra != nil || errb != nil {
		return bytes.Equal(a, b)
	}
	return reflect.DeepEqual(va, vb)
}

func decodeJSON(r json.RawMessage) (any, error) {
	d := json.NewDecoder(bytes.NewReader(r))
	d.UseNumber()
	var v any
	err := d.Decode(&v)
	return v, err
}

// wantErr fails t unless err matches target.
func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Errorf("%s: error %v, want one matching %q", what, err, target)
	}
}

func describe(actions []store.Action) string {
	parts := make([]string, len(actions))
	for i, a := range actions {
		var ids []string
		for _, m := range a.Tasks {
			ids = append(ids, fmt.Sprintf("%s:%s", m.ID, m.Status))
		}
		ids = append(ids, a.IDs...)
		parts[i] = fmt.Sprintf("%s(%s)", a.Op, strings.Join(ids, ","))
	}
	return strings.Join(parts, " ")
}

// cancelled returns a context that is already cancelled.
func canceled(t *testing.T) context.Context {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	return ctx
}

// notUTC lists the stamps of m that are set but not in UTC, or returns "".
func notUTC(m bgtype.TaskMeta) string {
	var b strings.Builder
	for _, f := range []struct {
		name string
		t    time.Time
	}{{"CreatedAt", m.CreatedAt}, {"StartedAt", m.StartedAt}, {"FinishedAt", m.FinishedAt}} {
		if !f.t.IsZero() && f.t.Location() != time.UTC {
			fmt.Fprintf(&b, " %s=%s (location %q)", f.name, fmtTime(f.t), f.t.Location())
		}
	}
	return b.String()
}

// diffResume says how got differs from want, "" when they hold the same
// values (JSON compared by value, times by instant).
func diffResume(want, got *bgtype.Resume) string {
	switch {
	case want == nil && got == nil:
		return ""
	case want == nil || got == nil:
		return fmt.Sprintf("%+v, want %+v", got, want)
	}
	w, g := *want, *got
	if !sameJSON(w.Spec, g.Spec) || !sameJSON(w.Checkpoint, g.Checkpoint) || (w.Checkpoint == nil) != (g.Checkpoint == nil) ||
		!w.SavedAt.Equal(g.SavedAt) || !w.QueuedAt.Equal(g.QueuedAt) || !w.ResumedAt.Equal(g.ResumedAt) {
		return fmt.Sprintf("%+v, want %+v", g, w)
	}
	w.Spec, w.Checkpoint, w.SavedAt, w.QueuedAt, w.ResumedAt = nil, nil, time.Time{}, time.Time{}, time.Time{}
	g.Spec, g.Checkpoint, g.SavedAt, g.QueuedAt, g.ResumedAt = nil, nil, time.Time{}, time.Time{}, time.Time{}
	if !w.Equal(&g) {
		return fmt.Sprintf("%+v, want %+v", *got, *want)
	}
	return ""
}
