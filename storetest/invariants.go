package storetest

import (
	"encoding/json"
	"testing"

	"github.com/bgtask/bgtask"
)

// testInvariants commits a sequence of upserts of one task, each in its own
// Commit, and checks the stored record against the reducer and against the
// record the lifecycle invariants require.
func testInvariants(t *testing.T, c Config) {
	const owner = "owner-inv"
	queued := bgtask.TaskMeta{
		ID: "task_inv", Owner: owner, Type: "tool", Name: "inv", Status: bgtask.StatusQueued,
		CreatedAt: at(1), Parent: bgtask.Parent{TaskID: "task_p", RunID: "run_1"}, Wake: bgtask.WakeOnActivity,
		Instance: "inst-1", Attempt: 1,
	}
	running := queued
	running.Status, running.StartedAt, running.Description = bgtask.StatusRunning, at(2), "working"
	awaiting := running
	awaiting.Status, awaiting.Input = bgtask.StatusAwaitingInput, &bgtask.InputRequest{ID: "req_1", Prompt: "go on?"}
	completed := running
	completed.Status, completed.FinishedAt, completed.Description = bgtask.StatusCompleted, at(3), "done"
	completed.Result = json.RawMessage(`{"ok":1}`)
	failed := running
	failed.Status, failed.FinishedAt, failed.Error, failed.Stack = bgtask.StatusFailed, at(4), "late failure", "stack"
	cancelledRec := running
	cancelledRec.Status, cancelledRec.FinishedAt, cancelledRec.Error = bgtask.StatusCancelled, at(4), "cancelled"

	mod := func(m bgtask.TaskMeta, f func(*bgtask.TaskMeta)) bgtask.TaskMeta {
		f(&m)
		return m
	}
	retry := mod(running, func(m *bgtask.TaskMeta) {
		m.Attempt, m.Instance, m.StartedAt, m.Description = 2, "inst-2", at(6), "retry"
	})

	cases := []struct {
		name   string
		writes []bgtask.TaskMeta
		want   bgtask.TaskMeta
	}{
		{"terminal is final: later failed dropped whole",
			[]bgtask.TaskMeta{queued, running, completed, failed}, completed},
		{"terminal is final: later running dropped",
			[]bgtask.TaskMeta{running, completed, mod(running, func(m *bgtask.TaskMeta) { m.Description = "again" })}, completed},
		{"terminal is final: a same-status re-mirror rewrites nothing that is set",
			[]bgtask.TaskMeta{running, completed, mod(completed, func(m *bgtask.TaskMeta) {
				m.Result, m.FinishedAt, m.Description = json.RawMessage(`{"ok":2}`), at(8), "rewritten"
			})}, completed},
		{"terminal is final: cancelled then completed",
			[]bgtask.TaskMeta{running, cancelledRec, completed}, cancelledRec},
		{"terminal is final: even on a higher attempt",
			[]bgtask.TaskMeta{running, failed, mod(completed, func(m *bgtask.TaskMeta) { m.Attempt = 2 })}, failed},
		{"status never goes back: running to queued dropped whole",
			[]bgtask.TaskMeta{running, mod(queued, func(m *bgtask.TaskMeta) { m.Description = "requeued" })}, running},
		{"status never goes back: awaiting_input to queued dropped whole",
			[]bgtask.TaskMeta{awaiting, mod(queued, func(m *bgtask.TaskMeta) { m.Description = "requeued" })}, awaiting},
		{"attempt fence: attempt-1 completion after attempt 2 dropped",
			[]bgtask.TaskMeta{running, retry, completed},
			mod(retry, func(m *bgtask.TaskMeta) { m.StartedAt = at(2) })},
		{"attempt fence: attempt-1 running after attempt 2 dropped",
			[]bgtask.TaskMeta{running, retry, mod(running, func(m *bgtask.TaskMeta) { m.Description = "stale" })},
			mod(retry, func(m *bgtask.TaskMeta) { m.StartedAt = at(2) })},
		{"attempt fence: a higher attempt is accepted",
			[]bgtask.TaskMeta{running, mod(failed, func(m *bgtask.TaskMeta) { m.Attempt, m.Instance = 2, "inst-2" })},
			mod(failed, func(m *bgtask.TaskMeta) { m.Attempt, m.Instance = 2, "inst-2" })},
		{"started stamped once",
			[]bgtask.TaskMeta{running, mod(awaiting, func(m *bgtask.TaskMeta) { m.StartedAt = at(7) }),
				mod(running, func(m *bgtask.TaskMeta) { m.StartedAt, m.Description = at(8), "resumed" })},
			mod(running, func(m *bgtask.TaskMeta) { m.Description = "resumed" })},
		{"started stamped by the first update that sets it",
			[]bgtask.TaskMeta{queued, mod(running, func(m *bgtask.TaskMeta) { m.StartedAt = at(5) })},
			mod(running, func(m *bgtask.TaskMeta) { m.StartedAt = at(5) })},
		{"finished stamped only by the terminal update",
			[]bgtask.TaskMeta{running, mod(running, func(m *bgtask.TaskMeta) { m.FinishedAt = at(5) }),
				mod(completed, func(m *bgtask.TaskMeta) { m.FinishedAt = at(6) })},
			mod(completed, func(m *bgtask.TaskMeta) { m.FinishedAt = at(6) })},
		{"identity fields set once",
			[]bgtask.TaskMeta{running, mod(running, func(m *bgtask.TaskMeta) {
				m.Type, m.Name, m.Parent, m.Detached, m.Wake, m.CreatedAt = "other", "other", bgtask.Parent{TaskID: "task_q"}, true, bgtask.WakeSilent, at(9)
				m.Description = "identity changed"
			})},
			mod(running, func(m *bgtask.TaskMeta) { m.Description = "identity changed" })},
		{"input request kept only while awaiting_input",
			[]bgtask.TaskMeta{awaiting, running}, running},
		{"input request kept only while awaiting_input: a terminal update drops it",
			[]bgtask.TaskMeta{awaiting, mod(completed, func(m *bgtask.TaskMeta) { m.Input = awaiting.Input })}, completed},
		{"running and awaiting_input follow each other",
			[]bgtask.TaskMeta{running, awaiting, running, awaiting}, awaiting},
		{"mutable fields replaced whole",
			[]bgtask.TaskMeta{mod(running, func(m *bgtask.TaskMeta) {
				m.Error, m.Stack, m.Result, m.Description = "transient", "s", json.RawMessage(`[1]`), "d"
			}), mod(running, func(m *bgtask.TaskMeta) { m.Description = "" })},
			mod(running, func(m *bgtask.TaskMeta) { m.Description = "" })},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			steps := make([]step, len(tc.writes))
			for i, w := range tc.writes {
				steps[i] = step{name: "write " + string(w.Status), actions: []bgtask.Action{bgtask.Upsert(w)}}
			}
			s := runSteps(t, c, owner, steps)
			if d := diffMeta(tc.want, get(t, s, tc.want.ID)); d != "" {
				t.Errorf("stored record differs from the one the invariants require:\n%s", d)
			}
		})
	}
}
