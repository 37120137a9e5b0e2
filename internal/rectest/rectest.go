// Package rectest builds the task records the tests of the runtime, the
// reducer and the in-memory store share.
package rectest

import (
	"encoding/json"
	"time"

	"github.com/bgtask/bgtask/bgtype"
)

// Fixed times of the records tests build.
var (
	T0 = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	T1 = T0.Add(time.Second)
	T2 = T0.Add(2 * time.Second)
	T3 = T0.Add(3 * time.Second)
)

// Meta builds a valid record: id, owner and status.
func Meta(id, owner string, st bgtype.Status) bgtype.TaskMeta {
	return bgtype.TaskMeta{ID: id, Owner: owner, Status: st}
}

// With applies edits to a copy of m.
func With(m bgtype.TaskMeta, edits ...func(*bgtype.TaskMeta)) bgtype.TaskMeta {
	for _, e := range edits {
		e(&m)
	}
	return m
}

// SnapOf keys records by id, as a snapshot holds them.
func SnapOf(ms ...bgtype.TaskMeta) map[string]bgtype.TaskMeta {
	out := make(map[string]bgtype.TaskMeta, len(ms))
	for _, m := range ms {
		out[m.ID] = m
	}
	return out
}

// Full returns a record with every field set.
func Full() bgtype.TaskMeta {
	return bgtype.TaskMeta{
		ID: "task_0190a1b2c3d4e5f60718293a4b5c6d7e", Owner: "thread-1", Type: "agent", Name: "researcher",
		Description: "looks things up", Status: bgtype.StatusFailed, Error: "panic: boom", Stack: "goroutine 7 [running]:\n...",
		Result:    json.RawMessage(`{"partial":[1,2,3]}`),
		CreatedAt: T0, StartedAt: T1.Add(1500 * time.Microsecond), FinishedAt: T2.Add(7 * time.Nanosecond),
		Parent:   bgtype.Parent{TaskID: "task_parent", RunID: "run-1", CallID: "call-1", AgentID: "agent-1"},
		Detached: true, Instance: "inst-7", Attempt: 3,
	}
}
