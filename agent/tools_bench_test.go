package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/bgtask/bgtask/internal/memstore"

	"github.com/bgtask/bgtask"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"
)

// BenchmarkToolDecodeSendArgs is the strict decoding of a typical
// send_message call.
func BenchmarkToolDecodeSendArgs(b *testing.B) {
	raw := []byte(`{"to":{"relation":"child","name":"researcher"},"message":"compare the three sources","in_reply_to":"input_01a2018d43f3700181a863890a0f4a21"}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeSendArgs(raw); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkToolGetTask is a get_task call on a completed task with a full
// message history.
func BenchmarkToolGetTask(b *testing.B) {
	m := newTestManager(b)
	o := m.Owner("thread-1")
	id, err := o.Spawn(b.Context(), func(ctx context.Context, tk *bgtask.Task) (any, error) {
		for range messagesPerTask {
			if err := tk.Emit(bgtype.EventTypeMessage, bgtype.Message{From: tk.ID(), Content: "progress note"}); err != nil {
				return nil, err
			}
		}
		return map[string]int{"rows": 42}, nil
	})
	if err != nil {
		b.Fatal(err)
	}
	waitTask(b, o, id)
	get := toolNamed(b, o, "get_task")
	args := json.RawMessage(`{"task_id":"` + id + `"}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := get.Call(b.Context(), args); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkToolListTasks is a list_tasks call without arguments (the
// default page) for an owner with 5,000 tasks; bytes/call is the size of
// the result the model reads.
func BenchmarkToolListTasks(b *testing.B) {
	s := memstore.New()
	m := newTestManager(b, bgtask.WithStore(s))
	for i := range 5000 {
		at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).Add(time.Duration(i) * time.Second)
		meta := bgtype.TaskMeta{ID: testTaskID(at, i), Owner: "thread-1", Name: fmt.Sprintf("crawler-%d", i), Type: bgtype.TypeSubAgent,
			Description: "crawl the pages of one site and summarise what changed since the last visit", Status: bgtype.StatusCompleted,
			CreatedAt: at, StartedAt: at, FinishedAt: at.Add(time.Second), Attempt: 1}
		if err := s.Commit(b.Context(), "thread-1", store.UpsertAction(meta)); err != nil {
			b.Fatal(err)
		}
	}
	list := toolNamed(b, m.Owner("thread-1"), "list_tasks")
	var size int
	b.ReportAllocs()
	for b.Loop() {
		res, err := list.Call(b.Context(), json.RawMessage(`{}`))
		if err != nil {
			b.Fatal(err)
		}
		size = len(res)
	}
	b.ReportMetric(float64(size), "bytes/call")
}
