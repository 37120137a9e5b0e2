package bgtype

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestEventMarshalJSON(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		ev   Event
		want string
	}{
		{"completed with result", Event{Kind: EventCompleted, TaskID: "task_1", Result: json.RawMessage(`{"score":3.125}`)},
			`{"kind":"completed","task_id":"task_1","result":{"score":3.125}}`},
		{"completed with nil result", Event{Kind: EventCompleted, TaskID: "task_1"},
			`{"kind":"completed","task_id":"task_1","result":null}`},
		{"completed with spaced result is compacted", Event{Kind: EventCompleted, TaskID: "task_1", Result: json.RawMessage(" { \"a\" : [1, 2] }\n")},
			`{"kind":"completed","task_id":"task_1","result":{"a":[1,2]}}`},
		{"completed drops fields of other kinds", Event{Kind: EventCompleted, TaskID: "task_1", Result: json.RawMessage(`1`), Error: "x", EventType: "y", Payload: json.RawMessage(`2`), Status: StatusFailed},
			`{"kind":"completed","task_id":"task_1","result":1}`},
		{"failed", Event{Kind: EventFailed, TaskID: "task_1", Error: "disk full"},
			`{"kind":"failed","task_id":"task_1","error":"disk full"}`},
		{"failed with empty error keeps the field", Event{Kind: EventFailed, TaskID: "task_1"},
			`{"kind":"failed","task_id":"task_1","error":""}`},
		{"failed escapes", Event{Kind: EventFailed, TaskID: "task_1", Error: "a \"b\" <c>\n"},
			`{"kind":"failed","task_id":"task_1","error":"a \"b\" \u003cc\u003e\n"}`},
		{"cancelled", Event{Kind: EventCanceled, TaskID: "task_1", Error: "ignored", Result: json.RawMessage(`1`)},
			`{"kind":"cancelled","task_id":"task_1"}`},
		{"interrupted", Event{Kind: EventInterrupted, TaskID: "task_1", Error: "instance inst-1 gone"},
			`{"kind":"interrupted","task_id":"task_1","error":"instance inst-1 gone"}`},
		{"custom with payload", Event{Kind: EventCustom, TaskID: "task_1", EventType: "progress", Payload: json.RawMessage(`{"pct":50}`)},
			`{"kind":"custom","task_id":"task_1","event_type":"progress","payload":{"pct":50}}`},
		{"custom with nil payload", Event{Kind: EventCustom, TaskID: "task_1", EventType: "tick"},
			`{"kind":"custom","task_id":"task_1","event_type":"tick","payload":null}`},
		{"custom message", Event{Kind: EventCustom, TaskID: "task_1", EventType: EventTypeMessage, Payload: json.RawMessage(`{"from":"parent","content":"hi"}`)},
			`{"kind":"custom","task_id":"task_1","event_type":"agent_message","payload":{"from":"parent","content":"hi"}}`},
		{"commit_failed", Event{Kind: EventCommitFailed, TaskID: "task_1", Status: StatusCompleted, Error: "store down"},
			`{"kind":"commit_failed","task_id":"task_1","status":"completed","error":"store down"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := tc.ev.MarshalJSON()
			if err != nil {
				t.Fatalf("MarshalJSON: %v", err)
			}
			if string(b) != tc.want {
				t.Fatalf("got  %s\nwant %s", b, tc.want)
			}
			// Through encoding/json, by value and by pointer.
			for _, v := range []any{tc.ev, &tc.ev} {
				b, err := json.Marshal(v)
				if err != nil || string(b) != tc.want {
					t.Fatalf("json.Marshal(%T): got %s %v", v, b, err)
				}
			}
		})
	}
}

func TestEventMarshalErrors(t *testing.T) {
	t.Parallel()
	for _, ev := range []Event{{TaskID: "task_1"}, {Kind: "exploded", TaskID: "task_1"}} {
		if _, err := ev.MarshalJSON(); !errors.Is(err, ErrInvalidEvent) || !strings.Contains(err.Error(), `unknown kind "`+string(ev.Kind)+`"`) {
			t.Errorf("%q: got %v, want ErrInvalidEvent naming the kind", ev.Kind, err)
		}
		if _, err := json.Marshal(ev); !errors.Is(err, ErrInvalidEvent) {
			t.Errorf("json.Marshal %q: got %v, want ErrInvalidEvent", ev.Kind, err)
		}
	}
	ev := Event{Kind: EventCompleted, TaskID: "task_1", Result: json.RawMessage(`{"a":`)}
	if _, err := ev.MarshalJSON(); err == nil {
		t.Errorf("invalid result: got nil error")
	}
}

func TestEventRoundTrip(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		ev, want Event
	}{
		{"completed", Event{Kind: EventCompleted, TaskID: "task_1", Result: json.RawMessage(`{"score":3.125}`)}, Event{}},
		{"completed nil result", Event{Kind: EventCompleted, TaskID: "task_1"}, Event{}},
		{"completed string result", Event{Kind: EventCompleted, TaskID: "task_1", Result: json.RawMessage(`"ok"`)}, Event{}},
		{"failed", Event{Kind: EventFailed, TaskID: "task_1", Error: "disk full"}, Event{}},
		{"failed empty error", Event{Kind: EventFailed, TaskID: "task_1"}, Event{}},
		{"cancelled", Event{Kind: EventCanceled, TaskID: "task_1"}, Event{}},
		{"interrupted", Event{Kind: EventInterrupted, TaskID: "task_1", Error: "gone"}, Event{}},
		{"custom", Event{Kind: EventCustom, TaskID: "task_1", EventType: "progress", Payload: json.RawMessage(`[1,"two",null]`)}, Event{}},
		{"custom nil payload", Event{Kind: EventCustom, TaskID: "task_1", EventType: "tick"}, Event{}},
		{"commit_failed", Event{Kind: EventCommitFailed, TaskID: "task_1", Status: StatusFailed, Error: "store down"}, Event{}},
		{"commit_failed without status", Event{Kind: EventCommitFailed, TaskID: "task_1", Error: "store down"}, Event{}},
		// Fields the kind does not carry are not written, so they do not come back.
		{"cancelled drops error", Event{Kind: EventCanceled, TaskID: "task_1", Error: "x"}, Event{Kind: EventCanceled, TaskID: "task_1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want := tc.want
			if want.Kind == "" {
				want = tc.ev
			}
			b, err := json.Marshal(tc.ev)
			if err != nil {
				t.Fatal(err)
			}
			var got Event
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatalf("unmarshal %s: %v", b, err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("round trip of %s:\n got  %#v\n want %#v", b, got, want)
			}
		})
	}
}

func TestEventUnmarshal(t *testing.T) {
	t.Parallel()
	// Fields of other kinds are read as given; null result/payload is nil.
	var e Event
	if err := json.Unmarshal([]byte(`{"task_id":"task_1","kind":"custom","event_type":"x","payload":null,"extra":1}`), &e); err != nil {
		t.Fatal(err)
	}
	if want := (Event{Kind: EventCustom, TaskID: "task_1", EventType: "x"}); !reflect.DeepEqual(e, want) {
		t.Fatalf("got %#v, want %#v", e, want)
	}
	// A decode replaces the whole event.
	e = Event{Kind: EventFailed, TaskID: "old", Error: "old", Payload: json.RawMessage(`1`)}
	if err := json.Unmarshal([]byte(`{"kind":"cancelled","task_id":"task_2"}`), &e); err != nil {
		t.Fatal(err)
	}
	if want := (Event{Kind: EventCanceled, TaskID: "task_2"}); !reflect.DeepEqual(e, want) {
		t.Fatalf("got %#v, want %#v", e, want)
	}
}

func TestEventUnmarshalErrors(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, in, want string }{
		{"unknown kind", `{"kind":"exploded","task_id":"task_1"}`, `bgtask: invalid event: unknown kind "exploded"`},
		{"missing kind", `{"task_id":"task_1"}`, `bgtask: invalid event: unknown kind ""`},
		{"missing task_id", `{"kind":"completed","result":1}`, `bgtask: invalid event: completed event without task_id`},
		{"empty task_id", `{"kind":"failed","task_id":"","error":"x"}`, `bgtask: invalid event: failed event without task_id`},
		{"custom without event_type", `{"kind":"custom","task_id":"task_1","payload":1}`, `bgtask: invalid event: custom event without event_type`},
		{"non-object array", `[1,2]`, ""},
		{"non-object string", `"completed"`, ""},
		{"null", `null`, `bgtask: invalid event: unknown kind ""`},
		{"kind not a string", `{"kind":1,"task_id":"task_1"}`, ""},
		{"bad status", `{"kind":"commit_failed","task_id":"task_1","status":"zombie"}`, ""},
		{"truncated", `{"kind":"completed","task_id":"ta`, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := Event{Kind: EventCanceled, TaskID: "keep"}
			err := e.UnmarshalJSON([]byte(tc.in))
			if !errors.Is(err, ErrInvalidEvent) {
				t.Fatalf("got %v, want ErrInvalidEvent", err)
			}
			if tc.want != "" && err.Error() != tc.want {
				t.Fatalf("text: got %q, want %q", err, tc.want)
			}
			if !reflect.DeepEqual(e, Event{Kind: EventCanceled, TaskID: "keep"}) {
				t.Fatalf("event changed on error: %#v", e)
			}
		})
	}
}

func TestEventKindIsTerminal(t *testing.T) {
	t.Parallel()
	want := map[EventKind]bool{EventCompleted: true, EventFailed: true, EventCanceled: true, EventInterrupted: true,
		EventCustom: false, EventCommitFailed: false, "": false}
	for k, w := range want {
		if got := k.IsTerminal(); got != w {
			t.Errorf("%q: got %v, want %v", k, got, w)
		}
	}
	// Every terminal status names a terminal event kind (terminalEvent relies on it).
	for _, st := range Statuses() {
		if got := EventKind(st).IsTerminal(); got != st.IsTerminal() {
			t.Errorf("status %s: kind terminal %v, status terminal %v", st, got, st.IsTerminal())
		}
	}
}

func TestEventMessage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		ev     Event
		want   Message
		wantOK bool
	}{
		{"message", Event{Kind: EventCustom, TaskID: "task_1", EventType: EventTypeMessage, Payload: json.RawMessage(`{"from":"parent","content":"hello"}`)},
			Message{From: "parent", Content: "hello"}, true},
		{"empty content", Event{Kind: EventCustom, TaskID: "task_1", EventType: EventTypeMessage, Payload: json.RawMessage(`{"from":"p","content":""}`)},
			Message{From: "p"}, true},
		{"other event type", Event{Kind: EventCustom, TaskID: "task_1", EventType: "progress", Payload: json.RawMessage(`{"from":"p","content":"c"}`)},
			Message{}, false},
		{"not custom", Event{Kind: EventCompleted, TaskID: "task_1", EventType: EventTypeMessage, Payload: json.RawMessage(`{"from":"p","content":"c"}`)},
			Message{}, false},
		{"payload not an object", Event{Kind: EventCustom, TaskID: "task_1", EventType: EventTypeMessage, Payload: json.RawMessage(`"hi"`)},
			Message{}, false},
		{"payload invalid", Event{Kind: EventCustom, TaskID: "task_1", EventType: EventTypeMessage, Payload: json.RawMessage(`{"from":`)},
			Message{}, false},
		{"no payload", Event{Kind: EventCustom, TaskID: "task_1", EventType: EventTypeMessage},
			Message{}, false},
		{"wrong field type", Event{Kind: EventCustom, TaskID: "task_1", EventType: EventTypeMessage, Payload: json.RawMessage(`{"from":1,"content":"c"}`)},
			Message{}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := tc.ev.Message()
			if got != tc.want || ok != tc.wantOK {
				t.Fatalf("got %+v %v, want %+v %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
	// The JSON of a Message is the payload shape.
	if got := mustJSON(t, Message{From: "a", Content: "b"}); got != `{"from":"a","content":"b"}` {
		t.Fatalf("Message JSON: got %s", got)
	}
}

func mustJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal %T: %v", v, err)
	}
	return string(b)
}
