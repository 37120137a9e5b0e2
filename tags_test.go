package bgtask

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/bgtask/bgtask/internal/memstore"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"
)

func doneTask(context.Context, *Task) (any, error) { return "ok", nil }

func TestWithTagsRefusesBadTags(t *testing.T) {
	m := newTestManager(t, WithCaps(Caps{MaxTags: 3, MaxTagBytes: 8}))
	o := m.Owner("alice")
	for _, tc := range []struct {
		tags []string
		want string
	}{
		{[]string{"a", "b", "c", "d"}, "bgtask: invalid argument: 4 tags, at most 3"},
		{[]string{"a", ""}, "bgtask: invalid argument: tag 1 is empty"},
		{[]string{"123456789"}, "bgtask: invalid argument: tag 0 longer than 8 bytes"},
		{[]string{"\xff"}, "bgtask: invalid argument: tag 0 is not UTF-8"},
		{[]string{" a"}, `bgtask: invalid argument: tag " a" has surrounding spaces`},
		{[]string{"a\nb"}, `bgtask: invalid argument: tag "a\nb" has control characters`},
		{[]string{"x", "x"}, `bgtask: invalid argument: tag "x" given twice`},
	} {
		_, err := o.Spawn(t.Context(), doneTask, WithTags(tc.tags...))
		if !errors.Is(err, ErrInvalidArgument) || err.Error() != tc.want {
			t.Errorf("Spawn(WithTags(%q)) = %v, want %q", tc.tags, err, tc.want)
		}
	}
	if n := countRecords(t, m, "alice"); n != 0 {
		t.Errorf("%d records after refused spawns, want 0", n)
	}
}

func TestWithTagsDefaultCaps(t *testing.T) {
	m := newTestManager(t)
	o := m.Owner("alice")
	many := make([]string, defaultMaxTags)
	for i := range many {
		many[i] = strings.Repeat("x", defaultMaxTagBytes-2) + string(rune('a'+i/26)) + string(rune('a'+i%26))
	}
	id := spawnFor(t, m, "alice", doneTask, WithTags(many...))
	if got := waitTask(t, o, id).Tags; !slices.Equal(got, many) {
		t.Errorf("Tags = %q, want %q", got, many)
	}
	if _, err := o.Spawn(t.Context(), doneTask, WithTags(append(many, "one-more")...)); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("Spawn with %d tags = %v, want ErrInvalidArgument", defaultMaxTags+1, err)
	}
}

// A store that is not a TagLister is filtered by ListTagged itself.
func TestListTaggedFiltersAPlainStore(t *testing.T) {
	plain := struct{ store.Store }{memstore.New()}
	m := newTestManager(t, WithStore(plain))
	a := spawnFor(t, m, "alice", doneTask, WithTags("x"))
	b := spawnFor(t, m, "alice", doneTask)
	waitTask(t, m.Owner("alice"), a)
	waitTask(t, m.Owner("alice"), b)
	var got []string
	for meta, err := range store.ListTagged(t.Context(), plain, "alice", "x") {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, meta.ID)
	}
	if !slices.Equal(got, []string{a}) {
		t.Errorf("ListTagged = %v, want [%s]", got, a)
	}
}

func TestApplyKeepsTags(t *testing.T) {
	var s store.Snapshot
	base := bgtype.TaskMeta{ID: "task_1", Owner: "o", Status: bgtype.StatusRunning, Tags: []string{"a"}}
	store.Apply(&s, store.UpsertAction(base))
	for _, u := range []bgtype.TaskMeta{
		{ID: "task_1", Owner: "o", Status: bgtype.StatusRunning, Tags: []string{"b"}},
		{ID: "task_1", Owner: "o", Tags: nil},
		{ID: "task_1", Owner: "o", Status: bgtype.StatusCompleted, Tags: []string{"c"}},
		{ID: "task_1", Owner: "o", Status: bgtype.StatusCompleted, Tags: []string{"d"}},
	} {
		store.Apply(&s, store.UpsertAction(u))
		if got := s.Tasks["task_1"].Tags; !slices.Equal(got, []string{"a"}) {
			t.Fatalf("after upsert %+v: Tags = %q, want [a]", u, got)
		}
	}
	base.Tags[0] = "changed"
	if got := s.Tasks["task_1"].Tags; !slices.Equal(got, []string{"a"}) {
		t.Errorf("the snapshot shares the caller's slice: Tags = %q", got)
	}
}
