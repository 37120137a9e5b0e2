package storetest

import (
	"encoding/json"
	"testing"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"
)

// testInvariants commits a sequence of upserts of one task, each in its own
// Commit, and checks the stored record against the reducer and against the
// record the lifecycle invariants require.
func testInvariants(t *testing.T, c Config) {
	const owner = "owner-inv"
	queued := bgtype.TaskMeta{
		ID: "task_inv", Owner: owner, Type: "tool", Name: "inv", Status: bgtype.StatusQueued,
		CreatedAt: at(1), Parent: bgtype.Parent{TaskID: "task_p", RunID: "run_1"}, Wake: bgtype.WakeOnActivity,
		Instance: "inst-1", Attempt: 1,
	}
	running := queued
	running.Status, running.StartedAt, running.Description = bgtype.StatusRunning, at(2), "working"
	awaiting := running
	awaiting.Status, awaiting.Input = bgtype.StatusAwaitingInput, &bgtype.InputRequest{ID: "req_1", Prompt: "go on?"}
	completed := running
	completed.Status, completed.FinishedAt, completed.Description = bgtype.StatusCompleted, at(3), "done"
	completed.Result = json.RawMessage(`{"ok":1}`)
	failed := running
	failed.Status, failed.FinishedAt, failed.Error, failed.Stack = bgtype.StatusFailed, at(4), "late failure", "stack"
	canceledRec := running
	canceledRec.Status, canceledRec.FinishedAt, canceledRec.Error = bgtype.StatusCanceled, at(4), "cancelled"

	mod := func(m bgtype.TaskMeta, f func(*bgtype.TaskMeta)) bgtype.TaskMeta {
		f(&m)
		return m
	}
	retry := mod(running, func(m *bgtype.TaskMeta) {
		m.Attempt, m.Instance, m.StartedAt, m.Description = 2, "inst-2", at(6), "retry"
	})

	cases := []struct {
		name   string
		writes []bgtype.TaskMeta
		want   bgtype.TaskMeta
	}{
		{"terminal is final: later failed dropped whole",
			[]bgtype.TaskMeta{queued, running, completed, failed}, completed},
		{"terminal is final: later running dropped",
			[]bgtype.TaskMeta{running, completed, mod(running, func(m *bgtype.TaskMeta) { m.Description = "again" })}, completed},
		{"terminal is final: a same-status re-mirror rewrites nothing that is set",
			[]bgtype.TaskMeta{running, completed, mod(completed, func(m *bgtype.TaskMeta) {
				m.Result, m.FinishedAt, m.Description = json.RawMessage(`{"ok":2}`), at(8), "rewritten"
			})}, completed},
		{"terminal is final: cancelled then completed",
			[]bgtype.TaskMeta{running, canceledRec, completed}, canceledRec},
		{"terminal is final: even on a higher attempt",
			[]bgtype.TaskMeta{running, failed, mod(completed, func(m *bgtype.TaskMeta) { m.Attempt = 2 })}, failed},
		{"status never goes back: running to queued dropped whole",
			[]bgtype.TaskMeta{running, mod(queued, func(m *bgtype.TaskMeta) { m.Description = "requeued" })}, running},
		{"status never goes back: awaiting_input to queued dropped whole",
			[]bgtype.TaskMeta{awaiting, mod(queued, func(m *bgtype.TaskMeta) { m.Description = "requeued" })}, awaiting},
		{"attempt fence: attempt-1 completion after attempt 2 dropped",
			[]bgtype.TaskMeta{running, retry, completed},
			mod(retry, func(m *bgtype.TaskMeta) { m.StartedAt = at(2) })},
		{"attempt fence: attempt-1 running after attempt 2 dropped",
			[]bgtype.TaskMeta{running, retry, mod(running, func(m *bgtype.TaskMeta) { m.Description = "stale" })},
			mod(retry, func(m *bgtype.TaskMeta) { m.StartedAt = at(2) })},
		{"attempt fence: a higher attempt is accepted",
			[]bgtype.TaskMeta{running, mod(failed, func(m *bgtype.TaskMeta) { m.Attempt, m.Instance = 2, "inst-2" })},
			mod(failed, func(m *bgtype.TaskMeta) { m.Attempt, m.Instance = 2, "inst-2" })},
		{"started stamped once",
			[]bgtype.TaskMeta{running, mod(awaiting, func(m *bgtype.TaskMeta) { m.StartedAt = at(7) }),
				mod(running, func(m *bgtype.TaskMeta) { m.StartedAt, m.Description = at(8), "resumed" })},
			mod(running, func(m *bgtype.TaskMeta) { m.Description = "resumed" })},
		{"started stamped by the first update that sets it",
			[]bgtype.TaskMeta{queued, mod(running, func(m *bgtype.TaskMeta) { m.StartedAt = at(5) })},
			mod(running, func(m *bgtype.TaskMeta) { m.StartedAt = at(5) })},
		{"finished stamped only by the terminal update",
			[]bgtype.TaskMeta{running, mod(running, func(m *bgtype.TaskMeta) { m.FinishedAt = at(5) }),
				mod(completed, func(m *bgtype.TaskMeta) { m.FinishedAt = at(6) })},
			mod(completed, func(m *bgtype.TaskMeta) { m.FinishedAt = at(6) })},
		{"identity fields set once",
			[]bgtype.TaskMeta{running, mod(running, func(m *bgtype.TaskMeta) {
				m.Type, m.Name, m.Parent, m.Detached, m.Wake, m.CreatedAt = "other", "other", bgtype.Parent{TaskID: "task_q"}, true, bgtype.WakeSilent, at(9)
				m.Description = "identity changed"
			})},
			mod(running, func(m *bgtype.TaskMeta) { m.Description = "identity changed" })},
		{"input request kept only while awaiting_input",
			[]bgtype.TaskMeta{awaiting, running}, running},
		{"input request kept only while awaiting_input: a terminal update drops it",
			[]bgtype.TaskMeta{awaiting, mod(completed, func(m *bgtype.TaskMeta) { m.Input = awaiting.Input })}, completed},
		{"running and awaiting_input follow each other",
			[]bgtype.TaskMeta{running, awaiting, running, awaiting}, awaiting},
		{"mutable fields replaced whole",
			[]bgtype.TaskMeta{mod(running, func(m *bgtype.TaskMeta) {
				m.Error, m.Stack, m.Result, m.Description = "transient", "s", json.RawMessage(`[1]`), "d"
			}), mod(running, func(m *bgtype.TaskMeta) { m.Description = "" })},
			mod(running, func(m *bgtype.TaskMeta) { m.Description = "" })},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			steps := make([]step, len(tc.writes))
			for i, w := range tc.writes {
				steps[i] = step{name: "write " + string(w.Status), actions: []store.Action{store.UpsertAction(w)}}
			}
			s := runSteps(t, c, owner, steps)
			if d := diffMeta(tc.want, get(t, s, tc.want.ID)); d != "" {
				t.Errorf("stored record differs from the one the invariants require:\n%s", d)
			}
		})
	}
}
