package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/bgtask/bgtask/internal/rectest"

	"github.com/bgtask/bgtask/bgtype"
)

func TestApply(t *testing.T) {
	t.Parallel()
	running := bgtype.TaskMeta{
		ID: "task_a", Owner: "o", Type: "agent", Name: "researcher", Description: "d1",
		Status: bgtype.StatusRunning, CreatedAt: rt0, StartedAt: rt1,
		Parent: bgtype.Parent{TaskID: "task_p", RunID: "run-1"}, Instance: "inst-1", Attempt: 1,
	}
	completed := with(running, func(m *bgtype.TaskMeta) {
		m.Status, m.Result, m.FinishedAt = bgtype.StatusCompleted, json.RawMessage(`{"x":1}`), rt2
	})
	tests := []struct {
		name  string
		prior []Action
		act   Action
		want  map[string]bgtype.TaskMeta
	}{
		{
			name: "insert into zero snapshot",
			act:  UpsertAction(running),
			want: snapOf(running),
		},
		{
			name:  "insert second id keeps first",
			prior: []Action{UpsertAction(running)},
			act:   UpsertAction(rmeta("task_b", "o", bgtype.StatusQueued)),
			want:  snapOf(running, rmeta("task_b", "o", bgtype.StatusQueued)),
		},
		{
			name:  "queued to running stamps StartedAt",
			prior: []Action{UpsertAction(with(running, func(m *bgtype.TaskMeta) { m.Status, m.StartedAt = bgtype.StatusQueued, time.Time{} }))},
			act:   UpsertAction(running),
			want:  snapOf(running),
		},
		{
			name:  "running to completed sets FinishedAt and result from the update",
			prior: []Action{UpsertAction(running)},
			act:   UpsertAction(completed),
			want:  snapOf(completed),
		},
		{
			name:  "running to failed with zero StartedAt in update keeps StartedAt",
			prior: []Action{UpsertAction(running)},
			act: UpsertAction(with(running, func(m *bgtype.TaskMeta) {
				m.Status, m.Error, m.StartedAt, m.FinishedAt = bgtype.StatusFailed, "boom", time.Time{}, rt3
			})),
			want: snapOf(with(running, func(m *bgtype.TaskMeta) { m.Status, m.Error, m.FinishedAt = bgtype.StatusFailed, "boom", rt3 })),
		},
		{
			name:  "completed then failed is dropped whole",
			prior: []Action{UpsertAction(running), UpsertAction(completed)},
			act: UpsertAction(with(running, func(m *bgtype.TaskMeta) {
				m.Status, m.Error, m.FinishedAt, m.Description = bgtype.StatusFailed, "late", rt3, "changed"
			})),
			want: snapOf(completed),
		},
		{
			name:  "completed then completed with another result keeps what was set",
			prior: []Action{UpsertAction(running), UpsertAction(completed)},
			act: UpsertAction(with(completed, func(m *bgtype.TaskMeta) {
				m.Result, m.FinishedAt, m.Attempt = json.RawMessage(`{"x":2}`), rt3, 5
			})),
			want: snapOf(completed),
		},
		{
			name:  "terminal then running is dropped",
			prior: []Action{UpsertAction(completed)},
			act:   UpsertAction(running),
			want:  snapOf(completed),
		},
		{
			name:  "interrupted is final too",
			prior: []Action{UpsertAction(with(running, func(m *bgtype.TaskMeta) { m.Status, m.Error = bgtype.StatusInterrupted, "instance gone" }))},
			act:   UpsertAction(completed),
			want:  snapOf(with(running, func(m *bgtype.TaskMeta) { m.Status, m.Error = bgtype.StatusInterrupted, "instance gone" })),
		},
		{
			name:  "running to queued is dropped",
			prior: []Action{UpsertAction(running)},
			act:   UpsertAction(with(running, func(m *bgtype.TaskMeta) { m.Status, m.Description = bgtype.StatusQueued, "changed" })),
			want:  snapOf(running),
		},
		{
			name:  "update from another owner is dropped",
			prior: []Action{UpsertAction(running)},
			act:   UpsertAction(with(completed, func(m *bgtype.TaskMeta) { m.Owner = "intruder" })),
			want:  snapOf(running),
		},
		{
			name:  "update fenced on an older attempt is dropped",
			prior: []Action{UpsertAction(with(running, func(m *bgtype.TaskMeta) { m.Attempt = 2 }))},
			act:   UpsertAction(with(completed, func(m *bgtype.TaskMeta) { m.Attempt = 1 })),
			want:  snapOf(with(running, func(m *bgtype.TaskMeta) { m.Attempt = 2 })),
		},
		{
			name:  "update on a newer attempt is applied",
			prior: []Action{UpsertAction(with(running, func(m *bgtype.TaskMeta) { m.Attempt = 2 }))},
			act:   UpsertAction(with(completed, func(m *bgtype.TaskMeta) { m.Attempt = 3 })),
			want:  snapOf(with(completed, func(m *bgtype.TaskMeta) { m.Attempt = 3 })),
		},
		{
			name:  "update on the same attempt is applied",
			prior: []Action{UpsertAction(running)},
			act:   UpsertAction(with(running, func(m *bgtype.TaskMeta) { m.Description, m.Instance = "d2", "inst-2" })),
			want:  snapOf(with(running, func(m *bgtype.TaskMeta) { m.Description, m.Instance = "d2", "inst-2" })),
		},
		{
			name:  "identity fields and stamps are kept once set",
			prior: []Action{UpsertAction(running)},
			act: UpsertAction(with(completed, func(m *bgtype.TaskMeta) {
				m.Type, m.Name, m.Parent, m.Detached = "other", "other-name", bgtype.Parent{RunID: "run-9"}, true
				m.CreatedAt, m.StartedAt = rt2, rt3
			})),
			want: snapOf(completed),
		},
		{
			name:  "running to completed takes the update's output size",
			prior: []Action{UpsertAction(running)},
			act:   UpsertAction(with(completed, func(m *bgtype.TaskMeta) { m.OutputBytes = 11 })),
			want:  snapOf(with(completed, func(m *bgtype.TaskMeta) { m.OutputBytes = 11 })),
		},
		{
			name:  "an update without a status and without an output size keeps the record's",
			prior: []Action{UpsertAction(with(running, func(m *bgtype.TaskMeta) { m.OutputBytes = 5 }))},
			act:   UpsertAction(with(running, func(m *bgtype.TaskMeta) { m.Status, m.Description = "", "d2" })),
			want:  snapOf(with(running, func(m *bgtype.TaskMeta) { m.Description, m.OutputBytes = "d2", 5 })),
		},
		{
			name:  "a terminal record takes the output size it lacks",
			prior: []Action{UpsertAction(running), UpsertAction(completed)},
			act:   UpsertAction(with(running, func(m *bgtype.TaskMeta) { m.Status, m.OutputBytes = "", 11 })),
			want:  snapOf(with(completed, func(m *bgtype.TaskMeta) { m.OutputBytes = 11 })),
		},
		{
			name:  "a terminal record keeps its output size",
			prior: []Action{UpsertAction(running), UpsertAction(with(completed, func(m *bgtype.TaskMeta) { m.OutputBytes = 11 }))},
			act:   UpsertAction(with(completed, func(m *bgtype.TaskMeta) { m.OutputBytes = 20 })),
			want:  snapOf(with(completed, func(m *bgtype.TaskMeta) { m.OutputBytes = 11 })),
		},
		{
			name: "insert with a negative output size is dropped",
			act:  UpsertAction(with(rmeta("task_z", "o", bgtype.StatusCompleted), func(m *bgtype.TaskMeta) { m.OutputBytes = -1 })),
			want: map[string]bgtype.TaskMeta{},
		},
		{
			name:  "a non-terminal update does not stamp FinishedAt",
			prior: []Action{UpsertAction(running)},
			act:   UpsertAction(with(running, func(m *bgtype.TaskMeta) { m.FinishedAt = rt3 })),
			want:  snapOf(running),
		},
		{
			name: "ReplaceAll keeps exactly the given ids and merges a terminal one",
			prior: []Action{
				UpsertAction(running),
				UpsertAction(with(completed, func(m *bgtype.TaskMeta) { m.ID = "task_b" })),
				UpsertAction(rmeta("task_c", "o", bgtype.StatusRunning)),
			},
			act: ReplaceAllAction(
				with(running, func(m *bgtype.TaskMeta) { m.ID, m.Attempt = "task_b", 9 }),
				rmeta("task_d", "o", bgtype.StatusQueued),
			),
			want: snapOf(
				with(completed, func(m *bgtype.TaskMeta) { m.ID = "task_b" }),
				rmeta("task_d", "o", bgtype.StatusQueued),
			),
		},
		{
			name:  "ReplaceAll merges a non-terminal one forward",
			prior: []Action{UpsertAction(running)},
			act:   ReplaceAllAction(with(completed, func(m *bgtype.TaskMeta) { m.CreatedAt = rt3 })),
			want:  snapOf(completed),
		},
		{
			name:  "ReplaceAll with nothing empties",
			prior: []Action{UpsertAction(running), UpsertAction(rmeta("task_b", "o", bgtype.StatusFailed))},
			act:   ReplaceAllAction(),
			want:  map[string]bgtype.TaskMeta{},
		},
		{
			name:  "ReplaceAll drops invalid records",
			prior: []Action{UpsertAction(running)},
			act:   ReplaceAllAction(rmeta("", "o", bgtype.StatusRunning), rmeta("task_z", "o", "zombie"), rmeta("task_y", "o", bgtype.StatusQueued)),
			want:  snapOf(rmeta("task_y", "o", bgtype.StatusQueued)),
		},
		{
			name: "Remove drops only terminal ids",
			prior: []Action{
				UpsertAction(running),
				UpsertAction(rmeta("task_b", "o", bgtype.StatusCompleted)),
				UpsertAction(rmeta("task_c", "o", bgtype.StatusFailed)),
				UpsertAction(rmeta("task_q", "o", bgtype.StatusQueued)),
			},
			act:  RemoveAction("task_a", "task_b", "task_q", "task_unknown"),
			want: snapOf(running, rmeta("task_c", "o", bgtype.StatusFailed), rmeta("task_q", "o", bgtype.StatusQueued)),
		},
		{
			name: "Announce marks only terminal ids",
			prior: []Action{
				UpsertAction(running),
				UpsertAction(rmeta("task_b", "o", bgtype.StatusCompleted)),
				UpsertAction(rmeta("task_c", "o", bgtype.StatusInterrupted)),
				UpsertAction(rmeta("task_q", "o", bgtype.StatusQueued)),
			},
			act: AnnounceAction("task_a", "task_b", "task_q", "task_unknown", "task_b"),
			want: snapOf(running, with(rmeta("task_b", "o", bgtype.StatusCompleted), func(m *bgtype.TaskMeta) { m.Announced = true }),
				rmeta("task_c", "o", bgtype.StatusInterrupted), rmeta("task_q", "o", bgtype.StatusQueued)),
		},
		{
			name:  "an update never clears Announced",
			prior: []Action{UpsertAction(completed), AnnounceAction("task_a")},
			act:   UpsertAction(with(completed, func(m *bgtype.TaskMeta) { m.Error = "late" })),
			want:  snapOf(with(completed, func(m *bgtype.TaskMeta) { m.Announced, m.Error = true, "late" })),
		},
		{
			name:  "a live record never takes Announced from an update",
			prior: []Action{UpsertAction(running)},
			act:   UpsertAction(with(running, func(m *bgtype.TaskMeta) { m.Announced = true })),
			want:  snapOf(running),
		},
		{
			name: "a live record is inserted without Announced",
			act:  UpsertAction(with(running, func(m *bgtype.TaskMeta) { m.Announced = true })),
			want: snapOf(running),
		},
		{
			name:  "ReplaceAll carries Announced onto a terminal record",
			prior: []Action{UpsertAction(completed)},
			act:   ReplaceAllAction(with(completed, func(m *bgtype.TaskMeta) { m.Announced = true })),
			want:  snapOf(with(completed, func(m *bgtype.TaskMeta) { m.Announced = true })),
		},
		{
			name:  "insert without id is dropped",
			prior: []Action{UpsertAction(running)},
			act:   UpsertAction(rmeta("", "o", bgtype.StatusRunning)),
			want:  snapOf(running),
		},
		{
			name: "insert with unknown status is dropped",
			act:  UpsertAction(rmeta("task_z", "o", "zombie")),
			want: map[string]bgtype.TaskMeta{},
		},
		{
			name: "insert with empty status is dropped",
			act:  UpsertAction(rmeta("task_z", "o", "")),
			want: map[string]bgtype.TaskMeta{},
		},
		{
			name: "insert without owner is dropped",
			act:  UpsertAction(rmeta("task_z", "", bgtype.StatusRunning)),
			want: map[string]bgtype.TaskMeta{},
		},
		{
			name: "insert with negative attempt is dropped",
			act:  UpsertAction(with(rmeta("task_z", "o", bgtype.StatusRunning), func(m *bgtype.TaskMeta) { m.Attempt = -1 })),
			want: map[string]bgtype.TaskMeta{},
		},
		{
			name:  "update with invalid result JSON is dropped",
			prior: []Action{UpsertAction(running)},
			act:   UpsertAction(with(completed, func(m *bgtype.TaskMeta) { m.Result = json.RawMessage(`{"x":`) })),
			want:  snapOf(running),
		},
		{
			name:  "unknown op changes nothing",
			prior: []Action{UpsertAction(running)},
			act:   Action{Op: "explode", Tasks: []bgtype.TaskMeta{completed}, IDs: []string{"task_a"}},
			want:  snapOf(running),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var s Snapshot
			for _, a := range tc.prior {
				Apply(&s, a)
			}
			Apply(&s, tc.act)
			got := s.Tasks
			if got == nil {
				got = map[string]bgtype.TaskMeta{}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("snapshot:\n got  %s\n want %s", mustJSON(t, got), mustJSON(t, tc.want))
			}
		})
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

func TestApplyKeepsNoReference(t *testing.T) {
	t.Parallel()
	for _, mk := range []func(bgtype.TaskMeta) Action{UpsertAction, func(m bgtype.TaskMeta) Action { return ReplaceAllAction(m) }} {
		res := []byte(`{"x":1}`)
		var s Snapshot
		Apply(&s, mk(bgtype.TaskMeta{ID: "task_a", Owner: "o", Status: bgtype.StatusCompleted, Result: res}))
		res[5] = '9'
		if got := string(s.Tasks["task_a"].Result); got != `{"x":1}` {
			t.Fatalf("stored result changed with the caller's buffer: got %s", got)
		}
	}
}

func TestTaskStateKey(t *testing.T) {
	t.Parallel()
	if TaskStateKey.Key != "background_task_state" {
		t.Fatalf("key: got %q", TaskStateKey.Key)
	}
	var s Snapshot
	TaskStateKey.Apply(&s, UpsertAction(rmeta("task_a", "o", bgtype.StatusRunning)))
	TaskStateKey.Apply(&s, UpsertAction(rmeta("task_a", "o", bgtype.StatusQueued)))
	if got := s.Tasks["task_a"].Status; got != bgtype.StatusRunning {
		t.Fatalf("status: got %q, want running", got)
	}
}

func TestActionJSON(t *testing.T) {
	t.Parallel()
	tests := []struct {
		a    Action
		want string
	}{
		{UpsertAction(rmeta("task_a", "o", bgtype.StatusRunning)), `{"op":"upsert","tasks":[{"task_id":"task_a","owner":"o","status":"running"}]}`},
		{ReplaceAllAction(), `{"op":"replace_all"}`},
		{RemoveAction("task_a", "task_b"), `{"op":"remove","ids":["task_a","task_b"]}`},
		{AnnounceAction("task_a"), `{"op":"announce","ids":["task_a"]}`},
		{Action{Op: OpUpsert, Tasks: []bgtype.TaskMeta{rmeta("task_a", "o", "")}, At: rt0},
			`{"op":"upsert","tasks":[{"task_id":"task_a","owner":"o","status":""}],"at":"2025-01-02T03:04:05Z"}`},
	}
	for _, tc := range tests {
		if got := mustJSON(t, tc.a); got != tc.want {
			t.Errorf("got %s, want %s", got, tc.want)
		}
		var back Action
		if err := json.Unmarshal([]byte(tc.want), &back); err != nil {
			t.Fatalf("unmarshal %s: %v", tc.want, err)
		}
		if !reflect.DeepEqual(back, tc.a) {
			t.Errorf("round trip: got %+v, want %+v", back, tc.a)
		}
	}
}

func TestTaskMetaJSONRoundTrip(t *testing.T) {
	t.Parallel()
	m := fullMeta()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"task_id":"task_0190a1b2c3d4e5f60718293a4b5c6d7e","owner":"thread-1","task_type":"agent","name":"researcher",` +
		`"description":"looks things up","status":"failed","error":"panic: boom","stack":"goroutine 7 [running]:\n...",` +
		`"result":{"partial":[1,2,3]},"created_at":"2025-01-02T03:04:05Z","started_at":"2025-01-02T03:04:06.0015Z",` +
		`"finished_at":"2025-01-02T03:04:07.000000007Z","parent":{"task_id":"task_parent","run_id":"run-1","call_id":"call-1","agent_id":"agent-1"},` +
		`"detached":true,"instance":"inst-7","attempt":3}`
	if string(b) != want {
		t.Fatalf("JSON:\n got  %s\n want %s", b, want)
	}
	var back bgtype.TaskMeta
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, m) {
		t.Fatalf("round trip:\n got  %+v\n want %+v", back, m)
	}
	// The minimal record omits every optional field.
	if got := mustJSON(t, rmeta("task_a", "o", bgtype.StatusQueued)); got != `{"task_id":"task_a","owner":"o","status":"queued"}` {
		t.Fatalf("minimal: got %s", got)
	}
}

func TestSnapshotJSONRoundTrip(t *testing.T) {
	t.Parallel()
	s := Snapshot{Tasks: snapOf(fullMeta(), rmeta("task_b", "thread-1", bgtype.StatusRunning),
		with(rmeta("task_c", "thread-1", bgtype.StatusCompleted), func(m *bgtype.TaskMeta) { m.Result = json.RawMessage(`null`) }))}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var back Snapshot
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, s) {
		t.Fatalf("round trip:\n got  %+v\n want %+v", back, s)
	}
	// TaskStateKey can carry the snapshot in a host's checkpoint.
	cp := map[string]json.RawMessage{TaskStateKey.Key: b}
	cb := mustJSON(t, cp)
	var cp2 map[string]Snapshot
	if err := json.Unmarshal([]byte(cb), &cp2); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cp2[TaskStateKey.Key], s) {
		t.Fatalf("checkpoint round trip differs")
	}
}

func TestSnapshotUnmarshalTolerant(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in string
		want     map[string]bgtype.TaskMeta
	}{
		{"empty object", `{}`, map[string]bgtype.TaskMeta{}},
		{"null tasks", `{"tasks":null}`, map[string]bgtype.TaskMeta{}},
		{"empty tasks", `{"tasks":{}}`, map[string]bgtype.TaskMeta{}},
		{"unknown fields ignored", `{"tasks":{"task_a":{"task_id":"task_a","owner":"o","status":"running","future":1}},"version":2}`,
			snapOf(rmeta("task_a", "o", bgtype.StatusRunning))},
		{"optional fields missing", `{"tasks":{"task_a":{"task_id":"task_a","owner":"o","status":"completed","result":{"ok":true}}}}`,
			snapOf(with(rmeta("task_a", "o", bgtype.StatusCompleted), func(m *bgtype.TaskMeta) { m.Result = json.RawMessage(`{"ok":true}`) }))},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var s Snapshot
			if err := json.Unmarshal([]byte(tc.in), &s); err != nil {
				t.Fatalf("unmarshal: %v", err)
			}
			if !reflect.DeepEqual(s.Tasks, tc.want) {
				t.Fatalf("got %+v, want %+v", s.Tasks, tc.want)
			}
		})
	}
}

// The doc of Snapshot.UnmarshalJSON says "A record without an id takes its
// key", and the decoder seeds TaskMeta{ID: key} for that, but
// TaskMeta.UnmarshalJSON decodes into a fresh value and drops the seed.
func TestSnapshotUnmarshalIDFromKey(t *testing.T) {
	t.Parallel()
	var s Snapshot
	err := json.Unmarshal([]byte(`{"tasks":{"task_a":{"owner":"o","status":"running"}}}`), &s)
	if err != nil {
		t.Fatalf("%v", err)
	}
	if want := snapOf(rmeta("task_a", "o", bgtype.StatusRunning)); !reflect.DeepEqual(s.Tasks, want) {
		t.Fatalf("got %+v, want %+v", s.Tasks, want)
	}
}

func TestSnapshotUnmarshalCorrupt(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in string
		wantIn   []string // substrings of the error text
	}{
		{"unknown status", `{"tasks":{"task_a":{"task_id":"task_a","owner":"o","status":"zombie"}}}`, []string{"task_a", `"zombie"`}},
		{"unknown status, id from key", `{"tasks":{"task_a":{"owner":"o","status":"zombie"}}}`, []string{"task_a", `"zombie"`}},
		{"status not a string", `{"tasks":{"task_a":{"task_id":"task_a","owner":"o","status":5}}}`, []string{"task_a", "status"}},
		{"missing status", `{"tasks":{"task_a":{"task_id":"task_a","owner":"o"}}}`, []string{"task_a", "unknown status"}},
		{"id mismatching key", `{"tasks":{"task_a":{"task_id":"task_b","owner":"o","status":"running"}}}`, []string{"task_b", `"task_a"`}},
		{"owner missing", `{"tasks":{"task_a":{"task_id":"task_a","status":"running"}}}`, []string{"task task_a: empty owner"}},
		{"negative attempt", `{"tasks":{"task_a":{"task_id":"task_a","owner":"o","status":"running","attempt":-2}}}`, []string{"task_a", "negative attempt -2"}},
		{"negative output size", `{"tasks":{"task_a":{"task_id":"task_a","owner":"o","status":"completed","output_bytes":-3}}}`, []string{"task task_a: negative output size -3"}},
		{"bad time", `{"tasks":{"task_a":{"task_id":"task_a","owner":"o","status":"running","created_at":"yesterday"}}}`, []string{"task_a"}},
		{"record not an object", `{"tasks":{"task_a":[1]}}`, []string{"task_a"}},
		{"record null", `{"tasks":{"task_a":null}}`, nil},
		{"tasks not an object", `{"tasks":[1,2]}`, []string{"snapshot"}},
		{"snapshot not an object", `[]`, []string{"snapshot"}},
		{"snapshot a string", `"tasks"`, []string{"snapshot"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var s Snapshot
			err := s.UnmarshalJSON([]byte(tc.in))
			if !errors.Is(err, bgtype.ErrCorrupt) {
				t.Fatalf("got %v, want ErrCorrupt", err)
			}
			for _, sub := range tc.wantIn {
				if !strings.Contains(err.Error(), sub) {
					t.Errorf("error %q does not contain %q", err, sub)
				}
			}
			if s.Tasks != nil {
				t.Errorf("snapshot changed on error: %+v", s.Tasks)
			}
			// Through encoding/json the error is the same.
			var s2 Snapshot
			if err2 := json.Unmarshal([]byte(tc.in), &s2); err2 == nil || err2.Error() != err.Error() {
				t.Errorf("json.Unmarshal: got %v, want %v", err2, err)
			}
		})
	}
}

// A result that is not JSON cannot sit inside a valid snapshot document: the
// whole document is then invalid, and the error is about the snapshot.
func TestSnapshotUnmarshalResultNotJSON(t *testing.T) {
	t.Parallel()
	var s Snapshot
	err := s.UnmarshalJSON([]byte(`{"tasks":{"task_a":{"task_id":"task_a","owner":"o","status":"completed","result":nope}}}`))
	if !errors.Is(err, bgtype.ErrCorrupt) {
		t.Fatalf("got %v, want ErrCorrupt", err)
	}
	// A record built in Go with a non-JSON result is refused by name.
	m := with(rmeta("task_a", "o", bgtype.StatusCompleted), func(m *bgtype.TaskMeta) { m.Result = json.RawMessage("nope") })
	err = m.Validate()
	if !errors.Is(err, bgtype.ErrCorrupt) || err.Error() != "bgtask: corrupt task metadata: task task_a: result is not valid JSON" {
		t.Fatalf("validate: got %v", err)
	}
}

func TestTaskMetaUnmarshal(t *testing.T) {
	t.Parallel()
	var m bgtype.TaskMeta
	if err := json.Unmarshal([]byte(`{"task_id":"task_a","owner":"o","status":"queued"}`), &m); err != nil {
		t.Fatal(err)
	}
	if want := rmeta("task_a", "o", bgtype.StatusQueued); !reflect.DeepEqual(m, want) {
		t.Fatalf("got %+v, want %+v", m, want)
	}
	errs := []struct{ in, want string }{
		{`{"owner":"o","status":"queued"}`, "bgtask: corrupt task metadata: task without id"},
		{`{"task_id":"task_a","status":"queued"}`, "bgtask: corrupt task metadata: task task_a: empty owner"},
		{`{"task_id":"task_a","owner":"o","status":"zombie"}`, `task_a`},
		{`{"task_id":"task_a","owner":"o","status":"running","result":}`, "bgtask: corrupt task metadata"},
	}
	for _, tc := range errs {
		var m bgtype.TaskMeta
		err := m.UnmarshalJSON([]byte(tc.in))
		if !errors.Is(err, bgtype.ErrCorrupt) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want ErrCorrupt containing %q", tc.in, err, tc.want)
		}
		if !reflect.DeepEqual(m, bgtype.TaskMeta{}) {
			t.Errorf("%s: record changed on error: %+v", tc.in, m)
		}
	}
}

func TestStatusJSON(t *testing.T) {
	t.Parallel()
	for _, st := range bgtype.Statuses() {
		b, err := json.Marshal(st)
		if err != nil || string(b) != `"`+string(st)+`"` {
			t.Fatalf("%s: got %s %v", st, b, err)
		}
		var back bgtype.Status
		if err := json.Unmarshal(b, &back); err != nil || back != st {
			t.Fatalf("%s: got %q %v", st, back, err)
		}
	}
	var s bgtype.Status
	if err := json.Unmarshal([]byte(`"Running"`), &s); !errors.Is(err, bgtype.ErrCorrupt) {
		t.Fatalf("Running: got %v, want ErrCorrupt", err)
	}
}

// TestApplySeedInvariants holds one case per invariant of the update
// function bgtask's reducer was modelled on (seed 004), in our own terms,
// plus the rules that replace the seed's partial updates with our whole
// records (see the table in Apply's doc comment).
func TestApplySeedInvariants(t *testing.T) {
	t.Parallel()
	queued := bgtype.TaskMeta{ID: "task_a", Owner: "o", Type: "tool", Name: "n", Status: bgtype.StatusQueued, CreatedAt: rt0, Attempt: 1,
		Parent: bgtype.Parent{TaskID: "task_p", RunID: "run-1"}}
	running := with(queued, func(m *bgtype.TaskMeta) { m.Status, m.StartedAt, m.Instance = bgtype.StatusRunning, rt1, "inst-1" })
	completed := with(running, func(m *bgtype.TaskMeta) { m.Status, m.FinishedAt, m.Description = bgtype.StatusCompleted, rt2, "done" })
	req := &bgtype.InputRequest{ID: "req_1", Prompt: "Approve?"}
	at := func(a Action, t time.Time) Action { a.At = t; return a }
	// noStatus is an update without a status: content only.
	noStatus := func(m bgtype.TaskMeta, edits ...func(*bgtype.TaskMeta)) bgtype.TaskMeta {
		m.Status = ""
		return with(m, edits...)
	}
	tests := []struct {
		name  string
		prior []Action
		act   Action
		want  map[string]bgtype.TaskMeta
	}{
		// A new record takes the stamps its status calls for from the commit time.
		{
			name: "an insert of a queued task is stamped created, not started",
			act:  at(UpsertAction(with(queued, func(m *bgtype.TaskMeta) { m.CreatedAt = time.Time{} })), rt3),
			want: snapOf(with(queued, func(m *bgtype.TaskMeta) { m.CreatedAt = rt3 })),
		},
		{
			name: "an insert of a terminal task without times is stamped created, started and finished",
			act:  at(UpsertAction(rmeta("task_b", "o", bgtype.StatusFailed)), rt3),
			want: snapOf(with(rmeta("task_b", "o", bgtype.StatusFailed), func(m *bgtype.TaskMeta) { m.CreatedAt, m.StartedAt, m.FinishedAt = rt3, rt3, rt3 })),
		},
		{
			name: "an insert without a commit time stamps nothing",
			act:  UpsertAction(rmeta("task_b", "o", bgtype.StatusFailed)),
			want: snapOf(rmeta("task_b", "o", bgtype.StatusFailed)),
		},
		// Leaving queued stamps the start once; it does not finish the task.
		{
			name:  "leaving queued stamps StartedAt with the commit time",
			prior: []Action{UpsertAction(queued)},
			act:   at(UpsertAction(with(queued, func(m *bgtype.TaskMeta) { m.Status = bgtype.StatusRunning })), rt3),
			want:  snapOf(with(queued, func(m *bgtype.TaskMeta) { m.Status, m.StartedAt = bgtype.StatusRunning, rt3 })),
		},
		{
			name:  "a start the update carries wins over the commit time",
			prior: []Action{UpsertAction(queued)},
			act:   at(UpsertAction(running), rt3),
			want:  snapOf(running),
		},
		{
			name:  "a start once stamped never moves",
			prior: []Action{UpsertAction(running)},
			act:   at(UpsertAction(with(running, func(m *bgtype.TaskMeta) { m.StartedAt = rt2 })), rt3),
			want:  snapOf(running),
		},
		// Ending stamps the finish; a terminal record is final.
		{
			name:  "a terminal update without a finish time is stamped with the commit time",
			prior: []Action{UpsertAction(running)},
			act:   at(UpsertAction(with(completed, func(m *bgtype.TaskMeta) { m.FinishedAt = time.Time{} })), rt3),
			want:  snapOf(with(completed, func(m *bgtype.TaskMeta) { m.FinishedAt = rt3 })),
		},
		{
			name:  "a terminal update without a finish time or commit time leaves it zero",
			prior: []Action{UpsertAction(running)},
			act:   UpsertAction(with(completed, func(m *bgtype.TaskMeta) { m.FinishedAt = time.Time{} })),
			want:  snapOf(with(completed, func(m *bgtype.TaskMeta) { m.FinishedAt = time.Time{} })),
		},
		{
			name:  "another terminal status on a terminal record is dropped whole, error text included",
			prior: []Action{UpsertAction(running), UpsertAction(completed)},
			act: at(UpsertAction(with(completed, func(m *bgtype.TaskMeta) {
				m.Status, m.Error, m.Instance = bgtype.StatusFailed, "orphaned: stale", "reaper"
			})), rt3),
			want: snapOf(completed),
		},
		{
			name:  "a same-status re-mirror fills the result the record lacks",
			prior: []Action{UpsertAction(running), UpsertAction(completed)},
			act:   UpsertAction(with(completed, func(m *bgtype.TaskMeta) { m.Result = json.RawMessage(`{"path":"/r.json"}`) })),
			want:  snapOf(with(completed, func(m *bgtype.TaskMeta) { m.Result = json.RawMessage(`{"path":"/r.json"}`) })),
		},
		{
			name:  "a same-status re-mirror rewrites nothing that is set",
			prior: []Action{UpsertAction(running), UpsertAction(with(completed, func(m *bgtype.TaskMeta) { m.Result = json.RawMessage(`1`) }))},
			act: at(UpsertAction(with(completed, func(m *bgtype.TaskMeta) {
				m.Result, m.Description, m.Instance, m.FinishedAt, m.Attempt = json.RawMessage(`2`), "rewritten", "inst-9", rt3, 4
			})), rt3),
			want: snapOf(with(completed, func(m *bgtype.TaskMeta) { m.Result = json.RawMessage(`1`) })),
		},
		{
			name:  "an update without a status enriches a terminal record",
			prior: []Action{UpsertAction(running), UpsertAction(with(completed, func(m *bgtype.TaskMeta) { m.Description = "" }))},
			act:   UpsertAction(noStatus(running, func(m *bgtype.TaskMeta) { m.Description = "enriched" })),
			want:  snapOf(with(completed, func(m *bgtype.TaskMeta) { m.Description = "enriched" })),
		},
		{
			name: "an update without a status stamps the finish a terminal record lacks",
			prior: []Action{UpsertAction(with(running, func(m *bgtype.TaskMeta) {
				m.Status, m.Error = bgtype.StatusCanceled, "cancelled"
			}))},
			act: at(UpsertAction(noStatus(running, func(m *bgtype.TaskMeta) { m.Error = "other" })), rt3),
			want: snapOf(with(running, func(m *bgtype.TaskMeta) {
				m.Status, m.Error, m.FinishedAt = bgtype.StatusCanceled, "cancelled", rt3
			})),
		},
		{
			name:  "a failed record takes an error text and stack it lacks, both or neither",
			prior: []Action{UpsertAction(with(running, func(m *bgtype.TaskMeta) { m.Status = bgtype.StatusFailed }))},
			act:   UpsertAction(with(running, func(m *bgtype.TaskMeta) { m.Status, m.Error, m.Stack = bgtype.StatusFailed, "boom", "goroutine 1" })),
			want:  snapOf(with(running, func(m *bgtype.TaskMeta) { m.Status, m.Error, m.Stack = bgtype.StatusFailed, "boom", "goroutine 1" })),
		},
		// An update without a status on a live record keeps its status.
		{
			name:  "an update without a status keeps a live status and replaces only what it sets",
			prior: []Action{UpsertAction(with(running, func(m *bgtype.TaskMeta) { m.Description, m.Error = "d1", "transient" }))},
			act:   UpsertAction(noStatus(running, func(m *bgtype.TaskMeta) { m.Description, m.Instance = "step 2", "" })),
			want:  snapOf(with(running, func(m *bgtype.TaskMeta) { m.Description, m.Error = "step 2", "transient" })),
		},
		{
			name: "an update without a status for an unknown id is dropped",
			act:  at(UpsertAction(noStatus(running)), rt3),
			want: map[string]bgtype.TaskMeta{},
		},
		// An input request means awaiting_input; an answer means running again.
		{
			name:  "an input request on a queued task moves it to awaiting_input and stamps the start",
			prior: []Action{UpsertAction(queued)},
			act:   at(UpsertAction(noStatus(queued, func(m *bgtype.TaskMeta) { m.Input = req })), rt3),
			want:  snapOf(with(queued, func(m *bgtype.TaskMeta) { m.Status, m.Input, m.StartedAt = bgtype.StatusAwaitingInput, req, rt3 })),
		},
		{
			name:  "an input request on a running update means awaiting_input",
			prior: []Action{UpsertAction(running)},
			act:   UpsertAction(with(running, func(m *bgtype.TaskMeta) { m.Input = req })),
			want:  snapOf(with(running, func(m *bgtype.TaskMeta) { m.Status, m.Input = bgtype.StatusAwaitingInput, req })),
		},
		{
			name: "an insert of a running task with an input request is awaiting_input",
			act:  UpsertAction(with(running, func(m *bgtype.TaskMeta) { m.Input = req })),
			want: snapOf(with(running, func(m *bgtype.TaskMeta) { m.Status, m.Input = bgtype.StatusAwaitingInput, req })),
		},
		{
			name:  "resuming clears the request",
			prior: []Action{UpsertAction(with(running, func(m *bgtype.TaskMeta) { m.Status, m.Input = bgtype.StatusAwaitingInput, req }))},
			act:   UpsertAction(running),
			want:  snapOf(running),
		},
		{
			name:  "an awaiting_input update without a request keeps the open one",
			prior: []Action{UpsertAction(with(running, func(m *bgtype.TaskMeta) { m.Status, m.Input = bgtype.StatusAwaitingInput, req }))},
			act:   UpsertAction(with(running, func(m *bgtype.TaskMeta) { m.Status, m.Description = bgtype.StatusAwaitingInput, "still asking" })),
			want: snapOf(with(running, func(m *bgtype.TaskMeta) {
				m.Status, m.Input, m.Description = bgtype.StatusAwaitingInput, req, "still asking"
			})),
		},
		{
			name:  "a terminal update ends the wait and drops the request it carries",
			prior: []Action{UpsertAction(with(running, func(m *bgtype.TaskMeta) { m.Status, m.Input = bgtype.StatusAwaitingInput, req }))},
			act:   UpsertAction(with(completed, func(m *bgtype.TaskMeta) { m.Input = req })),
			want:  snapOf(completed),
		},
		{
			name:  "an input request does not reach a terminal record",
			prior: []Action{UpsertAction(running), UpsertAction(completed)},
			act:   UpsertAction(noStatus(completed, func(m *bgtype.TaskMeta) { m.Input = req })),
			want:  snapOf(completed),
		},
		{
			name:  "an input request does not undo a move backwards",
			prior: []Action{UpsertAction(running)},
			act:   UpsertAction(with(queued, func(m *bgtype.TaskMeta) { m.Input = req })),
			want:  snapOf(running),
		},
		// Lineage (our counterpart of the seed's links) is set at insert.
		{
			name:  "lineage is kept, never cleared or rewritten by an update",
			prior: []Action{UpsertAction(running)},
			act:   UpsertAction(with(running, func(m *bgtype.TaskMeta) { m.Parent = bgtype.Parent{CallID: "call_9"} })),
			want:  snapOf(running),
		},
		// The attempt fences superseded writers.
		{
			name:  "an update on the record's attempt applies",
			prior: []Action{UpsertAction(queued)},
			act:   UpsertAction(with(running, func(m *bgtype.TaskMeta) { m.Description = "step 1" })),
			want:  snapOf(with(running, func(m *bgtype.TaskMeta) { m.Description = "step 1" })),
		},
		{
			name:  "an update on an older attempt is dropped whole, stamps included",
			prior: []Action{UpsertAction(with(queued, func(m *bgtype.TaskMeta) { m.Attempt = 2 }))},
			act:   at(UpsertAction(with(queued, func(m *bgtype.TaskMeta) { m.Status, m.Description = bgtype.StatusRunning, "superseded" })), rt3),
			want:  snapOf(with(queued, func(m *bgtype.TaskMeta) { m.Attempt = 2 })),
		},
		{
			name:  "an update without a status on a high attempt applies when it names that attempt",
			prior: []Action{UpsertAction(with(running, func(m *bgtype.TaskMeta) { m.Attempt = 99 }))},
			act:   UpsertAction(noStatus(running, func(m *bgtype.TaskMeta) { m.Attempt, m.Description = 99, "cancel from API" })),
			want:  snapOf(with(running, func(m *bgtype.TaskMeta) { m.Attempt, m.Description = 99, "cancel from API" })),
		},
		{
			name:  "an update on attempt 0 does not bypass the fence",
			prior: []Action{UpsertAction(with(running, func(m *bgtype.TaskMeta) { m.Attempt = 99 }))},
			act:   UpsertAction(noStatus(running, func(m *bgtype.TaskMeta) { m.Attempt, m.Description = 0, "cancel from API" })),
			want:  snapOf(with(running, func(m *bgtype.TaskMeta) { m.Attempt = 99 })),
		},
		{
			name:  "a reaper's next attempt supersedes the executor",
			prior: []Action{UpsertAction(running)},
			act: UpsertAction(with(running, func(m *bgtype.TaskMeta) {
				m.Status, m.Error, m.Attempt, m.FinishedAt = bgtype.StatusInterrupted, "worker heartbeat stopped", 2, rt2
			})),
			want: snapOf(with(running, func(m *bgtype.TaskMeta) {
				m.Status, m.Error, m.Attempt, m.FinishedAt = bgtype.StatusInterrupted, "worker heartbeat stopped", 2, rt2
			})),
		},
		{
			name: "after a reaper's next attempt the old executor cannot even enrich",
			prior: []Action{UpsertAction(running), UpsertAction(with(running, func(m *bgtype.TaskMeta) {
				m.Status, m.Error, m.Attempt, m.FinishedAt = bgtype.StatusInterrupted, "worker heartbeat stopped", 2, rt2
			}))},
			act: UpsertAction(noStatus(running, func(m *bgtype.TaskMeta) { m.Result, m.Description = json.RawMessage(`1`), "late heartbeat" })),
			want: snapOf(with(running, func(m *bgtype.TaskMeta) {
				m.Status, m.Error, m.Attempt, m.FinishedAt = bgtype.StatusInterrupted, "worker heartbeat stopped", 2, rt2
			})),
		},
		{
			name:  "a reaper's next attempt is inert when the task ended first",
			prior: []Action{UpsertAction(running), UpsertAction(completed)},
			act: UpsertAction(with(running, func(m *bgtype.TaskMeta) {
				m.Status, m.Error, m.Attempt, m.FinishedAt = bgtype.StatusInterrupted, "worker heartbeat stopped", 2, rt3
			})),
			want: snapOf(completed),
		},
		{
			name:  "a same-status re-mirror on a higher attempt keeps the terminal attempt",
			prior: []Action{UpsertAction(running), UpsertAction(completed)},
			act:   UpsertAction(with(completed, func(m *bgtype.TaskMeta) { m.Attempt = 2 })),
			want:  snapOf(completed),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var s Snapshot
			for _, a := range tc.prior {
				Apply(&s, a)
			}
			Apply(&s, tc.act)
			got := s.Tasks
			if got == nil {
				got = map[string]bgtype.TaskMeta{}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("snapshot:\n got  %s\n want %s", mustJSON(t, got), mustJSON(t, tc.want))
			}
		})
	}
}

func TestActionUnmarshalCorrupt(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, want string
	}{
		{"unknown status", `{"op":"upsert","tasks":[{"task_id":"task_a","owner":"o","status":"paused"}]}`,
			`bgtask: corrupt task metadata: task task_a: unknown status "paused"`},
		{"replace_all without a status", `{"op":"replace_all","tasks":[{"task_id":"task_a","owner":"o"}]}`,
			`bgtask: corrupt task metadata: task task_a: unknown status ""`},
		{"upsert without an owner", `{"op":"upsert","tasks":[{"task_id":"task_a"}]}`,
			`bgtask: corrupt task metadata: task task_a: empty owner`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var a Action
			err := json.Unmarshal([]byte(tc.in), &a)
			if !errors.Is(err, bgtype.ErrCorrupt) || err.Error() != tc.want {
				t.Fatalf("err = %v, want %s (matching ErrCorrupt)", err, tc.want)
			}
		})
	}
}

// A late re-mirror or content-only update fills what a terminal record
// lacks, never what it has; the action's At stamps the times it lacks.
func ExampleApply_enrich() {
	var snap Snapshot
	now := time.Date(2026, 11, 23, 1, 0, 0, 0, time.UTC)
	done := bgtype.TaskMeta{ID: "task_a", Owner: "thread-1", Status: bgtype.StatusCompleted}
	end := UpsertAction(done)
	end.At = now // the reducer reads no clock: the commit's time comes with the action
	Apply(&snap, end)

	late := done
	late.Status, late.Result = "", json.RawMessage(`{"path":"/r.json"}`) // no status: content only
	Apply(&snap, UpsertAction(late))

	lost := done
	lost.Status, lost.Error = bgtype.StatusFailed, "orphaned" // another terminal status: dropped whole
	Apply(&snap, UpsertAction(lost))

	m := snap.Tasks["task_a"]
	fmt.Println(m.Status, string(m.Result), m.FinishedAt.Format(time.RFC3339), m.Error == "")
	// Output: completed {"path":"/r.json"} 2026-11-23T01:00:00Z true
}

// The shared record builders (internal/rectest), under this package's names.
var (
	rt0, rt1, rt2, rt3 = rectest.T0, rectest.T1, rectest.T2, rectest.T3
	rmeta              = rectest.Meta
	with               = rectest.With
	snapOf             = rectest.SnapOf
	fullMeta           = rectest.Full
)
