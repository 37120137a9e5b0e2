package agent

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// fuzzArgs checks a tool's argument decoder on any input: it never panics,
// a refused input gets an "invalid arguments: " error matching
// ErrToolArguments, and an accepted input re-encodes to an input that is
// accepted and decodes to the same arguments.
func fuzzArgs[T any](f *testing.F, decode func([]byte) (T, error), seeds ...string) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		a, err := decode(raw)
		if err != nil {
			if !errors.Is(err, ErrToolArguments) || !strings.HasPrefix(err.Error(), "invalid arguments: ") {
				t.Fatalf("decode(%q): %v", raw, err)
			}
			return
		}
		enc, err := json.Marshal(a)
		if err != nil {
			t.Fatalf("encode %+v: %v", a, err)
		}
		b, err := decode(enc)
		if err != nil || !reflect.DeepEqual(a, b) {
			t.Fatalf("decode(%q) = %+v; re-encoded %s decodes to %+v, %v", raw, a, enc, b, err)
		}
	})
}

func FuzzListTasksArgs(f *testing.F) {
	fuzzArgs(f, decodeListArgs, `{}`, `{"status":["running"],"type":"sub_agent"}`, `{"status":null}`, `{"type":" x "}`,
		`{"status":["queued","awaiting_input"],"limit":10,"cursor":"00000000000000017461736b5f78"}`, `{"limit":5e1}`, `{"cursor":"0000000000000001"}`)
}

func FuzzGetTaskArgs(f *testing.F) {
	fuzzArgs(f, decodeGetArgs, `{"task_id":"task_0"}`, `{"task_id":" a\u00e9 "}`, `{"task_id":""}`, `{"task_id":"t","output_since":12}`, `{"task_id":"t","output_tail":5e1}`)
}

func FuzzCancelTaskArgs(f *testing.F) {
	fuzzArgs(f, decodeCancelArgs, `{"target":{"relation":"self"}}`, `{"target":{"relation":"child","name":"crawler"}}`, `{"target":{"relation":"child"}}`)
}

func FuzzSendMessageArgs(f *testing.F) {
	fuzzArgs(f, decodeSendArgs, `{"to":{"relation":"parent"},"message":"done"}`,
		`{"to":{"relation":"child","name":"w"},"message":"<yes> & \"no\"","in_reply_to":"input_1"}`)
}

func FuzzWaitTaskArgs(f *testing.F) {
	decode := func(raw []byte) (waitArgs, error) { return decodeWaitArgs(raw, waitMaxSeconds) }
	fuzzArgs(f, decode, `{"task_id":"task_0"}`, `{"task_id":"task_0","timeout_seconds":2.0e1}`, `{"task_id":"t","timeout_seconds":-0}`)
}
