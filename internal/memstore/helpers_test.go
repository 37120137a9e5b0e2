package memstore

import (
	"encoding/json"
	"time"

	"github.com/bgtask/bgtask/bgtype"
)

// Fixed times of the records tests build.
var (
	rt0 = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	rt1 = rt0.Add(time.Second)
	rt2 = rt0.Add(2 * time.Second)
	rt3 = rt0.Add(3 * time.Second)
)

// rmeta builds a valid record for the reducer tests.
func rmeta(id, owner string, st bgtype.Status) bgtype.TaskMeta {
	return bgtype.TaskMeta{ID: id, Owner: owner, Status: st}
}

// with applies edits to a copy of m.
func with(m bgtype.TaskMeta, edits ...func(*bgtype.TaskMeta)) bgtype.TaskMeta {
	for _, e := range edits {
		e(&m)
	}
	return m
}

func snapOf(ms ...bgtype.TaskMeta) map[string]bgtype.TaskMeta {
	out := make(map[string]bgtype.TaskMeta, len(ms))
	for _, m := range ms {
		out[m.ID] = m
	}
	return out
}

// fullMeta has every field set.
func fullMeta() bgtype.TaskMeta {
	return bgtype.TaskMeta{
		ID: "task_0190a1b2c3d4e5f60718293a4b5c6d7e", Owner: "thread-1", Type: "agent", Name: "researcher",
		Description: "looks things up", Status: bgtype.StatusFailed, Error: "panic: boom", Stack: "goroutine 7 [running]:\n...",
		Result:    json.RawMessage(`{"partial":[1,2,3]}`),
		CreatedAt: rt0, StartedAt: rt1.Add(1500 * time.Microsecond), FinishedAt: rt2.Add(7 * time.Nanosecond),
		Parent:   bgtype.Parent{TaskID: "task_parent", RunID: "run-1", CallID: "call-1", AgentID: "agent-1"},
		Detached: true, Instance: "inst-7", Attempt: 3,
	}
}
