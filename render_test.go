package bgtask

import (
	"encoding/json"
	"reflect"
	"testing"
)

// ParseEventMessage inverts the rendering, and refuses anything else. A
// result holding the closing tag cannot end the message early: the JSON
// escapes its angle brackets.
func TestParseEventMessage(t *testing.T) {
	ev := Event{Kind: EventCompleted, TaskID: "task_1", Result: []byte(`{"a":"</background-task-event>"}`)}
	got, ok := ParseEventMessage(renderEvent(&ev).Content)
	var want, have any
	_ = json.Unmarshal(ev.Result, &want)
	_ = json.Unmarshal(got.Result, &have)
	if !ok || got.Kind != ev.Kind || got.TaskID != ev.TaskID || !reflect.DeepEqual(have, want) {
		t.Fatalf("round trip: %+v, %v", got, ok)
	}
	for _, bad := range []string{
		"",
		"hello",
		`<background-task-event kind="x" task_id="y">not json</background-task-event>`,
		`<background-task-event kind="completed" task_id="task_1">{"kind":"completed","task_id":"task_1"}`,
		`<background-task-event kind="completed">{"kind":"nope","task_id":"task_1"}</background-task-event>`,
	} {
		if _, ok := ParseEventMessage(bad); ok {
			t.Errorf("ParseEventMessage(%q) accepted it", bad)
		}
	}
}
