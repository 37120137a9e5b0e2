package bgtask

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
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
		{"cancelled", Event{Kind: EventCancelled, TaskID: "task_1", Error: "ignored", Result: json.RawMessage(`1`)},
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
		{"cancelled", Event{Kind: EventCancelled, TaskID: "task_1"}, Event{}},
		{"interrupted", Event{Kind: EventInterrupted, TaskID: "task_1", Error: "gone"}, Event{}},
		{"custom", Event{Kind: EventCustom, TaskID: "task_1", EventType: "progress", Payload: json.RawMessage(`[1,"two",null]`)}, Event{}},
		{"custom nil payload", Event{Kind: EventCustom, TaskID: "task_1", EventType: "tick"}, Event{}},
		{"commit_failed", Event{Kind: EventCommitFailed, TaskID: "task_1", Status: StatusFailed, Error: "store down"}, Event{}},
		{"commit_failed without status", Event{Kind: EventCommitFailed, TaskID: "task_1", Error: "store down"}, Event{}},
		// Fields the kind does not carry are not written, so they do not come back.
		{"cancelled drops error", Event{Kind: EventCancelled, TaskID: "task_1", Error: "x"}, Event{Kind: EventCancelled, TaskID: "task_1"}},
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
	if want := (Event{Kind: EventCancelled, TaskID: "task_2"}); !reflect.DeepEqual(e, want) {
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
			e := Event{Kind: EventCancelled, TaskID: "keep"}
			err := e.UnmarshalJSON([]byte(tc.in))
			if !errors.Is(err, ErrInvalidEvent) {
				t.Fatalf("got %v, want ErrInvalidEvent", err)
			}
			if tc.want != "" && err.Error() != tc.want {
				t.Fatalf("text: got %q, want %q", err, tc.want)
			}
			if !reflect.DeepEqual(e, Event{Kind: EventCancelled, TaskID: "keep"}) {
				t.Fatalf("event changed on error: %#v", e)
			}
		})
	}
}

func TestEventKindIsTerminal(t *testing.T) {
	t.Parallel()
	want := map[EventKind]bool{EventCompleted: true, EventFailed: true, EventCancelled: true, EventInterrupted: true,
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

func TestEncodeJSONMatchesMarshal(t *testing.T) {
	t.Parallel()
	type point struct {
		X, Y int
		Tag  string `json:"tag,omitempty"`
	}
	tests := []struct {
		name string
		v    any
	}{
		{"nil", nil},
		{"true", true},
		{"false", false},
		{"int zero", 0},
		{"int negative", -42},
		{"int max", math.MaxInt},
		{"int min", math.MinInt},
		{"int64", int64(1) << 62},
		{"int64 min", int64(math.MinInt64)},
		{"int32", int32(-7)},
		{"uint64 max", uint64(math.MaxUint64)},
		{"float integral", 3.0},
		{"float negative integral", -2.0},
		{"float big integral", 999999999999999.0},
		{"float 1e14", 1e14},
		{"float 1e15 (slow path)", 1e15},
		{"float 1e21", 1e21},
		{"float fraction", 3.125},
		{"float tiny", 1e-7},
		{"float32", float32(0.1)},
		{"string empty", ""},
		{"string plain", "hello world 123 !#$%'()*+,-./:;=?@[]^_`{|}~"},
		{"string DEL", "a\x7fb"},
		{"string quote", `say "hi"`},
		{"string backslash", `a\b`},
		{"string newline", "a\nb\tc\r"},
		{"string control", "a\x00b\x1f"},
		{"string html", "<script>&</script>"},
		{"string unicode", "héllo 世界"},
		{"string line separator", "a\u2028b\u2029"},
		{"string invalid utf8", "a\xffb"},
		{"raw object", json.RawMessage(`{"a":1}`)},
		{"raw string", json.RawMessage(`"x"`)},
		{"raw null", json.RawMessage(`null`)},
		{"map", map[string]any{"b": 1, "a": []int{1, 2}, "c": nil}},
		{"struct", point{X: 1, Y: -2}},
		{"pointer to struct", &point{X: 3, Tag: "<t>"}},
		{"slice", []string{"a", "b"}},
		{"nil slice", []int(nil)},
		{"nil map", map[string]int(nil)},
		{"typed nil pointer", (*point)(nil)},
		{"bytes", []byte("hi")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want, wantErr := json.Marshal(tc.v)
			got, err := encodeJSON(tc.v)
			if (err != nil) != (wantErr != nil) {
				t.Fatalf("error: got %v, json.Marshal %v", err, wantErr)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("got %s, json.Marshal %s", got, want)
			}
		})
	}
}

func TestEncodeJSONErrors(t *testing.T) {
	t.Parallel()
	for name, v := range map[string]any{
		"raw invalid":   json.RawMessage(`{"a":`),
		"raw trailing":  json.RawMessage(`1 2`),
		"raw empty":     json.RawMessage(``),
		"NaN":           math.NaN(),
		"+Inf":          math.Inf(1),
		"-Inf":          math.Inf(-1),
		"channel":       make(chan int),
		"func":          func() {},
		"map int chan":  map[string]any{"c": make(chan int)},
		"complex":       complex(1, 2),
		"unsupported32": float32(math.Inf(1)),
	} {
		if got, err := encodeJSON(v); err == nil {
			t.Errorf("%s: got %s, want an error", name, got)
		}
		if _, err := json.Marshal(v); err == nil {
			t.Errorf("%s: json.Marshal accepts it, the test is wrong", name)
		}
	}
}

func TestEncodeJSONCopiesRaw(t *testing.T) {
	t.Parallel()
	raw := json.RawMessage(`{"a":1}`)
	got, err := encodeJSON(raw)
	if err != nil {
		t.Fatal(err)
	}
	raw[5] = '2'
	if string(got) != `{"a":1}` {
		t.Fatalf("encoded bytes share the caller's buffer: %s", got)
	}
}

// Cases where the fast path gives other bytes than json.Marshal, or fails
// where json.Marshal succeeds. Each is kept as a subtest so the report names
// it; see the skip messages.
func TestEncodeJSONFastPathDivergence(t *testing.T) {
	t.Parallel()
	t.Run("negative zero", func(t *testing.T) {
		v := math.Copysign(0, -1)
		want, _ := json.Marshal(v)
		got, err := encodeJSON(v)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("encode.go float64 fast path writes %s for -0.0, json.Marshal writes %s", got, want)
		}
	})
	t.Run("raw with spaces", func(t *testing.T) {
		v := json.RawMessage(" {\"a\": 1} ")
		want, _ := json.Marshal(v)
		got, err := encodeJSON(v)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("encode.go json.RawMessage fast path keeps spaces (%q), json.Marshal compacts (%q)", got, want)
		}
	})
	t.Run("nil raw message", func(t *testing.T) {
		var v json.RawMessage
		want, wantErr := json.Marshal(v)
		if wantErr != nil || string(want) != "null" {
			t.Fatalf("json.Marshal(nil RawMessage) = %s %v", want, wantErr)
		}
		got, err := encodeJSON(v)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("encodeJSON(json.RawMessage(nil)) = %q, %v; json.Marshal gives null, so a task returning a nil RawMessage ends failed", got, err)
		}
	})
	t.Run("invalid raw error text", func(t *testing.T) {
		_, err := encodeJSON(json.RawMessage(`{"a":`))
		if err == nil {
			t.Fatal("no error")
		}
		if err.Error() == "" {
			t.Fatal("encode.go returns &json.SyntaxError{} with an empty message for invalid json.RawMessage, so the failed task's error ends in \"not JSON-encodable: \" with no reason")
		}
	})
}
