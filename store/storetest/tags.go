package storetest

import (
	"slices"
	"testing"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"
)

// testTags: a record's tags are stored in order and never changed by a later
// update, and store.ListTagged (the store's own filter when it is a
// store.TagLister) yields the owner's records that carry a tag, with the
// status filter and the order of List.
func testTags(t *testing.T, c Config) {
	s := c.New(t)
	const a, b = "owner-a", "owner-b"
	tagged := func(m bgtype.TaskMeta, tags ...string) bgtype.TaskMeta { m.Tags = tags; return m }
	commit(t, s, a,
		store.UpsertAction(tagged(rec("task_1", a, bgtype.StatusRunning, 3), "deploy", "eu", "ünï \"q\" <x>")),
		store.UpsertAction(tagged(rec("task_2", a, bgtype.StatusRunning, 1), "eu")),
		store.UpsertAction(rec("task_3", a, bgtype.StatusRunning, 2)),
		store.UpsertAction(tagged(rec("task_4", a, bgtype.StatusRunning, 4), "Deploy")),
	)
	commit(t, s, b, store.UpsertAction(tagged(rec("task_b", b, bgtype.StatusRunning, 0), "deploy")))
	// A later update carrying other tags (or none) keeps the stored ones.
	commit(t, s, a, store.UpsertAction(tagged(ended(rec("task_1", a, bgtype.StatusRunning, 3), bgtype.StatusCompleted, 5), "other")))
	commit(t, s, a, store.UpsertAction(rec("task_2", a, bgtype.StatusRunning, 1)))

	if got := get(t, s, "task_1").Tags; !slices.Equal(got, []string{"deploy", "eu", "ünï \"q\" <x>"}) {
		t.Errorf("Get(task_1).Tags = %q", got)
	}
	if got := load(t, s, a).Tasks["task_2"].Tags; !slices.Equal(got, []string{"eu"}) {
		t.Errorf("Load: task_2 Tags = %q, want [eu]", got)
	}
	if got := get(t, s, "task_3").Tags; len(got) != 0 {
		t.Errorf("Get(task_3).Tags = %q, want none", got)
	}
	for _, tc := range []struct {
		owner, tag string
		statuses   []bgtype.Status
		want       []string
	}{
		{a, "eu", nil, []string{"task_2", "task_1"}},
		{a, "deploy", nil, []string{"task_1"}},
		{a, "Deploy", nil, []string{"task_4"}},
		{a, "ünï \"q\" <x>", nil, []string{"task_1"}},
		{a, "eu", []bgtype.Status{bgtype.StatusRunning}, []string{"task_2"}},
		{a, "eu", []bgtype.Status{bgtype.StatusCompleted, bgtype.StatusFailed}, []string{"task_1"}},
		{a, "other", nil, nil},
		{a, "", nil, []string{"task_2", "task_3", "task_1", "task_4"}},
		{b, "deploy", nil, []string{"task_b"}},
		{b, "eu", nil, nil},
		{"owner-nobody", "deploy", nil, nil},
	} {
		what := "ListTagged(" + tc.owner + ", " + tc.tag + ")"
		wantIDs(t, what, idsOf(list(t, what, store.ListTagged(t.Context(), s, tc.owner, tc.tag, tc.statuses...))), tc.want)
	}
	_, err, _ := collect(store.ListTagged(t.Context(), s, a, "eu", "paused"))
	wantErr(t, "ListTagged with an unknown status", err, bgtype.ErrInvalidStatus)
}
