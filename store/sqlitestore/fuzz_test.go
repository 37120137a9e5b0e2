package sqlitestore

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/bgtask/bgtask/bgtype"
)

// FuzzDecodeRow: whatever a row holds, decode returns a record that passes
// the core's own validation, or an error matching bgtype.ErrCorrupt that
// names the task; it never panics.
func FuzzDecodeRow(f *testing.F) {
	f.Add("task_1", "thread-1", "completed", `{"n":1}`, true, "", int64(0), "input_1")
	f.Add("task_2", "thread-1", "paused", "", false, "on_activity", int64(2), "")
	f.Add("task_3", "", "running", "", false, "", int64(0), "")
	f.Add("task_4", "thread-1", "failed", `{"a":`, true, "", int64(-1), "")
	f.Add("", "thread-1", "queued", "null", true, "never", int64(1), "")
	f.Fuzz(func(t *testing.T, id, owner, status, result string, hasResult bool, wake string, attempt int64, inputID string) {
		r := row{id: id, owner: owner, status: status, wake: wake, attempt: attempt,
			result: sql.NullString{String: result, Valid: hasResult}, inputID: sql.NullString{String: inputID, Valid: inputID != ""}}
		m, err := r.decode()
		if err != nil {
			if !errors.Is(err, bgtype.ErrCorrupt) || id != "" && !strings.Contains(err.Error(), "task "+id+":") {
				t.Fatalf("decode error %q does not match ErrCorrupt or name task %q", err, id)
			}
			return
		}
		// A decoded record is one the core accepts: its JSON decodes.
		b, merr := json.Marshal(m)
		if merr != nil {
			t.Fatalf("marshal %+v: %v", m, merr)
		}
		var back bgtype.TaskMeta
		if err := back.UnmarshalJSON(b); err != nil {
			t.Fatalf("decode accepted a record the core refuses: %v (%s)", err, b)
		}
	})
}

// FuzzDecodeResume: the resume column decodes to a Resume the core
// accepts, or to an error matching ErrCorrupt that names the task.
func FuzzDecodeResume(f *testing.F) {
	f.Add(`{"kind":"crawl/v1","spec":{"url":"x"},"max_attempts":3}`)
	f.Add(`{"kind":"crawl/v1","spec":{},"max_attempts":3,"checkpoint":{"page":4},"saved_at":"2026-01-02T13:58:00Z","saved_by":2,"yields":1,"queued_at":"2026-01-02T14:00:00+01:00","last_error":"gone"}`)
	f.Add(`{"kind":"","spec":1,"max_attempts":3}`)
	f.Add(`{"kind":"k/v1","spec":1,"max_attempts":0}`)
	f.Add(`{"kind":"k/v1","spec":1,"max_attempts":1,"yields":-1}`)
	f.Add(`{"kind":"k/v1","max_attempts":1}`)
	f.Add(`{"kind":"k/v1","spec":null,"checkpoint":null,"max_attempts":1}`)
	f.Add(`[]`)
	f.Fuzz(func(t *testing.T, resume string) {
		r := row{id: "task_1", owner: "thread-1", status: "running", tags: "[]", resume: sql.NullString{String: resume, Valid: true}}
		m, err := r.decode()
		if err != nil {
			if !errors.Is(err, bgtype.ErrCorrupt) || !strings.Contains(err.Error(), "task task_1:") {
				t.Fatalf("decode error %q does not match ErrCorrupt or name the task", err)
			}
			return
		}
		b, merr := json.Marshal(m)
		if merr != nil {
			t.Fatalf("marshal %+v: %v", m, merr)
		}
		var back bgtype.TaskMeta
		if err := back.UnmarshalJSON(b); err != nil {
			t.Fatalf("decode accepted a record the core refuses: %v (%s)", err, b)
		}
		if b2, _ := json.Marshal(back); !bytes.Equal(b, b2) { // a marshalled record reads back the same (JSON escapes aside)
			t.Fatalf("round trip changed the record:\n%s\n%s", b, b2)
		}
	})
}
