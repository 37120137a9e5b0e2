package storetest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"
)

// testReducerRules: the rules of store.Apply beyond "terminal is
// final" hold in the store exactly as in the reducer: a terminal record
// takes a same-status or status-less update only to fill what it lacks; an
// update without a status keeps a live status; an input request means
// awaiting_input; the action's commit time (At) stamps what a record lacks;
// a reaper's next attempt is inert when the task ended first. Each case
// runs once with one commit per action and once with every action in one
// commit.
func testReducerRules(t *testing.T, c Config) {
	const owner = "owner-rules"
	queued := bgtype.TaskMeta{
		ID: "task_rules", Owner: owner, Type: "tool", Name: "rules", Status: bgtype.StatusQueued,
		CreatedAt: at(1), Parent: bgtype.Parent{RunID: "run_1"}, Attempt: 1,
	}
	mod := func(m bgtype.TaskMeta, f func(*bgtype.TaskMeta)) bgtype.TaskMeta {
		f(&m)
		return m
	}
	running := mod(queued, func(m *bgtype.TaskMeta) { m.Status, m.StartedAt, m.Instance = bgtype.StatusRunning, at(2), "inst-1" })
	completed := mod(running, func(m *bgtype.TaskMeta) { m.Status, m.FinishedAt = bgtype.StatusCompleted, at(3) })
	noStatus := func(m bgtype.TaskMeta, f func(*bgtype.TaskMeta)) bgtype.TaskMeta {
		m.Status = ""
		return mod(m, f)
	}
	upsertAt := func(m bgtype.TaskMeta, n int) store.Action {
		a := store.UpsertAction(m)
		a.At = at(n)
		return a
	}
	req := &bgtype.InputRequest{ID: "req_1", Prompt: "Approve?"}
	more := []bgtype.InputRequest{{ID: "req_2", Prompt: "Which?"}, {ID: "req_3", Prompt: "Why?"}}
	interrupted := func(m *bgtype.TaskMeta) {
		m.Status, m.Error, m.Attempt, m.FinishedAt = bgtype.StatusInterrupted, "instance gone", 2, at(9)
	}

	cases := []struct {
		name    string
		actions []store.Action
		want    bgtype.TaskMeta
	}{
		{"a same-status re-mirror fills the result a terminal record lacks",
			[]store.Action{store.UpsertAction(running), store.UpsertAction(completed),
				store.UpsertAction(mod(completed, func(m *bgtype.TaskMeta) { m.Result = json.RawMessage(`{"path":"/r.json"}`) }))},
			mod(completed, func(m *bgtype.TaskMeta) { m.Result = json.RawMessage(`{"path":"/r.json"}`) })},
		{"a same-status re-mirror rewrites nothing that is set",
			[]store.Action{store.UpsertAction(running), store.UpsertAction(mod(completed, func(m *bgtype.TaskMeta) { m.Result, m.Description = json.RawMessage(`1`), "done" })),
				upsertAt(mod(completed, func(m *bgtype.TaskMeta) {
					m.Result, m.Description, m.Instance, m.FinishedAt, m.Attempt = json.RawMessage(`2`), "rewritten", "inst-9", at(8), 3
				}), 8)},
			mod(completed, func(m *bgtype.TaskMeta) { m.Result, m.Description = json.RawMessage(`1`), "done" })},
		{"an update without a status enriches a terminal record",
			[]store.Action{store.UpsertAction(running), store.UpsertAction(completed),
				store.UpsertAction(noStatus(running, func(m *bgtype.TaskMeta) { m.Description = "enriched" }))},
			mod(completed, func(m *bgtype.TaskMeta) { m.Description = "enriched" })},
		{"a terminal record takes the error text, stack and instance it lacks",
			[]store.Action{store.UpsertAction(mod(running, func(m *bgtype.TaskMeta) { m.Status, m.FinishedAt, m.Instance = bgtype.StatusFailed, at(3), "" })),
				store.UpsertAction(noStatus(running, func(m *bgtype.TaskMeta) { m.Error, m.Stack, m.Instance = "boom", "goroutine 1", "inst-2" }))},
			mod(running, func(m *bgtype.TaskMeta) {
				m.Status, m.FinishedAt, m.Error, m.Stack, m.Instance = bgtype.StatusFailed, at(3), "boom", "goroutine 1", "inst-2"
			})},
		{"another terminal status on a terminal record is dropped whole",
			[]store.Action{store.UpsertAction(running), store.UpsertAction(completed),
				store.UpsertAction(mod(completed, func(m *bgtype.TaskMeta) { m.Status, m.Error = bgtype.StatusFailed, "orphaned" }))},
			completed},
		{"an update without a status keeps a live status and replaces only what it sets",
			[]store.Action{store.UpsertAction(mod(running, func(m *bgtype.TaskMeta) { m.Description, m.Error = "d1", "transient" })),
				store.UpsertAction(noStatus(running, func(m *bgtype.TaskMeta) { m.Description, m.Instance = "step 2", "" }))},
			mod(running, func(m *bgtype.TaskMeta) { m.Description, m.Error = "step 2", "transient" })},
		{"the commit time stamps the start when leaving queued and the finish when ending",
			[]store.Action{store.UpsertAction(queued), upsertAt(mod(queued, func(m *bgtype.TaskMeta) { m.Status = bgtype.StatusRunning }), 4),
				upsertAt(mod(queued, func(m *bgtype.TaskMeta) { m.Status = bgtype.StatusFailed }), 5)},
			mod(queued, func(m *bgtype.TaskMeta) { m.Status, m.StartedAt, m.FinishedAt = bgtype.StatusFailed, at(4), at(5) })},
		{"the commit time stamps an insert of a terminal record without times",
			[]store.Action{upsertAt(mod(queued, func(m *bgtype.TaskMeta) { m.Status, m.CreatedAt = bgtype.StatusCanceled, time.Time{} }), 6)},
			mod(queued, func(m *bgtype.TaskMeta) {
				m.Status, m.CreatedAt, m.StartedAt, m.FinishedAt = bgtype.StatusCanceled, at(6), at(6), at(6)
			})},
		{"an input request on a running task means awaiting_input",
			[]store.Action{store.UpsertAction(running), store.UpsertAction(noStatus(running, func(m *bgtype.TaskMeta) { m.Input = req }))},
			mod(running, func(m *bgtype.TaskMeta) { m.Status, m.Input = bgtype.StatusAwaitingInput, req })},
		{"an inserted record with an input request is awaiting_input",
			[]store.Action{store.UpsertAction(mod(running, func(m *bgtype.TaskMeta) { m.Input = req }))},
			mod(running, func(m *bgtype.TaskMeta) { m.Status, m.Input = bgtype.StatusAwaitingInput, req })},
		{"an awaiting_input update without a request keeps the open one",
			[]store.Action{store.UpsertAction(mod(running, func(m *bgtype.TaskMeta) { m.Input = req })),
				store.UpsertAction(mod(running, func(m *bgtype.TaskMeta) { m.Status, m.Description = bgtype.StatusAwaitingInput, "asking" }))},
			mod(running, func(m *bgtype.TaskMeta) { m.Status, m.Input, m.Description = bgtype.StatusAwaitingInput, req, "asking" })},
		{"an update with a request replaces the open requests as a whole",
			[]store.Action{store.UpsertAction(mod(running, func(m *bgtype.TaskMeta) { m.Input, m.MoreInput = req, more })),
				store.UpsertAction(mod(running, func(m *bgtype.TaskMeta) { m.Input = &more[1] }))},
			mod(running, func(m *bgtype.TaskMeta) { m.Status, m.Input = bgtype.StatusAwaitingInput, &more[1] })},
		{"an awaiting_input update without a request keeps every open one",
			[]store.Action{store.UpsertAction(mod(running, func(m *bgtype.TaskMeta) { m.Input, m.MoreInput = req, more })),
				store.UpsertAction(noStatus(running, func(m *bgtype.TaskMeta) { m.Description = "asking" }))},
			mod(running, func(m *bgtype.TaskMeta) {
				m.Status, m.Input, m.MoreInput, m.Description = bgtype.StatusAwaitingInput, req, more, "asking"
			})},
		{"leaving awaiting_input clears every open request",
			[]store.Action{store.UpsertAction(mod(running, func(m *bgtype.TaskMeta) { m.Input, m.MoreInput = req, more })),
				store.UpsertAction(running)},
			running},
		{"a reaper's next attempt supersedes the executor, which cannot even enrich",
			[]store.Action{store.UpsertAction(running), store.UpsertAction(mod(running, interrupted)),
				store.UpsertAction(noStatus(running, func(m *bgtype.TaskMeta) { m.Result = json.RawMessage(`1`) }))},
			mod(running, interrupted)},
		{"an end takes the update's output size",
			[]store.Action{store.UpsertAction(running), store.UpsertAction(mod(completed, func(m *bgtype.TaskMeta) { m.OutputBytes = 11 }))},
			mod(completed, func(m *bgtype.TaskMeta) { m.OutputBytes = 11 })},
		{"a terminal record takes the output size it lacks, and keeps it",
			[]store.Action{store.UpsertAction(running), store.UpsertAction(completed),
				store.UpsertAction(noStatus(running, func(m *bgtype.TaskMeta) { m.OutputBytes = 11 })),
				store.UpsertAction(mod(completed, func(m *bgtype.TaskMeta) { m.OutputBytes = 20 }))},
			mod(completed, func(m *bgtype.TaskMeta) { m.OutputBytes = 11 })},
		{"a reaper's next attempt is inert when the task ended first",
			[]store.Action{store.UpsertAction(running), store.UpsertAction(completed), store.UpsertAction(mod(running, interrupted))},
			completed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			steps := make([]step, len(tc.actions))
			for i, a := range tc.actions {
				steps[i] = step{name: "commit " + describe([]store.Action{a}), actions: []store.Action{a}}
			}
			for _, run := range []struct {
				how   string
				steps []step
			}{
				{"one commit per action", steps},
				{"one commit", []step{{name: "commit " + describe(tc.actions), actions: tc.actions}}},
			} {
				s := runSteps(t, c, owner, run.steps)
				if d := diffMeta(tc.want, get(t, s, tc.want.ID)); d != "" {
					t.Errorf("%s: stored record differs from the one the rules require:\n%s", run.how, d)
				}
			}
		})
	}
}
