package bgtask

import (
	"context"
	"encoding/json"
	"testing"
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
	m := mtNew(b)
	o := m.Owner("thread-1")
	id, err := o.Spawn(b.Context(), func(ctx context.Context, tk *Task) (any, error) {
		for range messagesPerTask {
			if err := tk.Emit(EventTypeMessage, Message{From: tk.ID(), Content: "progress note"}); err != nil {
				return nil, err
			}
		}
		return map[string]int{"rows": 42}, nil
	})
	if err != nil {
		b.Fatal(err)
	}
	mtWait(b, o, id)
	get := ttTool(b, o, "get_task")
	args := json.RawMessage(`{"task_id":"` + id + `"}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := get.Call(b.Context(), args); err != nil {
			b.Fatal(err)
		}
	}
}
