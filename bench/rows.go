package main

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"
)

// recordGen makes the records a store benchmark writes, as a Manager writes
// them: a batch of new running tasks, then the same tasks completed, then
// a new batch, and so on.
type recordGen struct {
	owner string
	seq   int
	now   time.Time
	cur   []bgtype.TaskMeta // the running batch awaiting completion
}

var benchResult = json.RawMessage(`{"summary":"three sources agree"}`)

func newRecordGen(owner string) *recordGen {
	return &recordGen{owner: owner, now: time.Now().UTC().Truncate(time.Microsecond)}
}

// batch returns the next k records: k new running tasks, or the k
// previous ones completed. The slice is reused by the next call.
func (g *recordGen) batch(k int) []bgtype.TaskMeta {
	if len(g.cur) == k && g.cur[0].Status == bgtype.StatusRunning {
		for i := range g.cur {
			g.cur[i].Status, g.cur[i].Result, g.cur[i].FinishedAt = bgtype.StatusCompleted, benchResult, g.now
		}
		return g.cur
	}
	g.cur = g.cur[:0]
	for range k {
		g.seq++
		g.cur = append(g.cur, bgtype.TaskMeta{
			ID: fmt.Sprintf("task_%s_%09d", g.owner, g.seq), Owner: g.owner, Type: bgtype.TypeTask,
			Name: "research", Status: bgtype.StatusRunning, CreatedAt: g.now, StartedAt: g.now, Instance: "bench",
		})
	}
	return g.cur
}

// upserts returns one Upsert action per record.
func upserts(ms []bgtype.TaskMeta) []store.Action {
	acts := make([]store.Action, len(ms))
	for i, m := range ms {
		acts[i] = store.UpsertAction(m)
	}
	return acts
}

// resultText is the record's result as the raw tables keep it: JSON text,
// or NULL.
func resultText(m bgtype.TaskMeta) any {
	if m.Result == nil {
		return nil
	}
	return string(m.Result)
}

// micros is t in UTC microseconds since the Unix epoch, or NULL when unset.
func micros(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixMicro()
}
