package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bgtask/bgtask/bgtype"
)

// The fuzz input of FuzzApply is a sequence of 6-byte steps
// [op b1 b2 b3 b4 b5]; a shorter tail, and any step after the 48th, is
// ignored.
//
//	op&3      0,1 upsert; 2 replace_all; 3 remove
//	op>>2&1   replace_all: add a second task; remove: add a second id
//	op>>3&1   replace_all: with no task at all; remove: announce instead
//	op>>4&1   the action's At is rt3 (else zero)
//	op>>5&1   the (first) task carries an input request
//	b1        id fzIDs[b1&3], owner fzOwners[(b1>>2)%3]
//	b2        status fzStatuses[b2&7], attempt (b2>>3&3)-1; remove: second id fzIDs[b2>>5&3]
//	b3        result fzResults[b3&7], CreatedAt fzTimes[b3>>3&3]
//	b4        StartedAt fzTimes[b4&3], FinishedAt fzTimes[b4>>2&3],
//	          Type b4>>4&1, Name b4>>5&1, Detached b4>>6&1, Error b4>>7&1
//	b5        Description fzDescs[b5&3], Parent.RunID b5>>2&1, Instance b5>>3&1,
//	          second task's status fzStatuses[b5>>4&7] (its id is the next of fzIDs)
var (
	fzIDs      = []string{"task_a", "task_b", "task_c", ""}
	fzOwners   = []string{"o", "p", ""}
	fzStatuses = []bgtype.Status{bgtype.StatusQueued, bgtype.StatusRunning, bgtype.StatusCompleted, bgtype.StatusFailed, bgtype.StatusCanceled, bgtype.StatusInterrupted, "zombie", ""}
	fzResults  = []string{"", `1`, `{"x":1}`, `"s"`, `{`, `null`, `[1, 2]`, `nul`}
	fzTimes    = []time.Time{{}, rt0, rt1, rt2}
	fzDescs    = []string{"", "d1", "d2", "d3"}
)

const (
	fzStep     = 6
	fzMaxSteps = 48
)

func fzResult(i byte) json.RawMessage {
	s := fzResults[i&7]
	if s == "" {
		return nil
	}
	return append(json.RawMessage(nil), s...) // fresh bytes: the test scribbles on them later
}

func fzTask(b []byte) bgtype.TaskMeta {
	m := bgtype.TaskMeta{
		ID:          fzIDs[b[1]&3],
		Owner:       fzOwners[(b[1]>>2)%3],
		Status:      fzStatuses[b[2]&7],
		Attempt:     int64(b[2]>>3&3) - 1,
		Result:      fzResult(b[3]),
		CreatedAt:   fzTimes[b[3]>>3&3],
		StartedAt:   fzTimes[b[4]&3],
		FinishedAt:  fzTimes[b[4]>>2&3],
		Detached:    b[4]>>6&1 == 1,
		Description: fzDescs[b[5]&3],
	}
	if b[4]>>4&1 == 1 {
		m.Type = "t"
	}
	if b[4]>>5&1 == 1 {
		m.Name = "n"
	}
	if b[4]>>7&1 == 1 {
		m.Error = "e"
	}
	if b[5]>>2&1 == 1 {
		m.Parent.RunID = "run-1"
	}
	if b[5]>>3&1 == 1 {
		m.Instance = "i1"
	}
	return m
}

func fzAction(b []byte) Action {
	a := fzOp(b)
	if b[0]>>4&1 == 1 {
		a.At = rt3
	}
	if b[0]>>5&1 == 1 && len(a.Tasks) > 0 {
		a.Tasks[0].Input = &bgtype.InputRequest{ID: "req", Prompt: "?"}
	}
	return a
}

func fzOp(b []byte) Action {
	switch b[0] & 3 {
	case 0, 1:
		return UpsertAction(fzTask(b))
	case 2:
		if b[0]>>3&1 == 1 {
			return ReplaceAllAction()
		}
		tasks := []bgtype.TaskMeta{fzTask(b)}
		if b[0]>>2&1 == 1 {
			second := fzTask(b)
			second.ID = fzIDs[(b[1]+1)&3]
			second.Status = fzStatuses[b[5]>>4&7]
			second.Result = fzResult(b[3] + 1)
			tasks = append(tasks, second)
		}
		return ReplaceAllAction(tasks...)
	default:
		ids := []string{fzIDs[b[1]&3]}
		if b[0]>>2&1 == 1 {
			ids = append(ids, fzIDs[b[2]>>5&3])
		}
		if b[0]>>3&1 == 1 {
			return AnnounceAction(ids...)
		}
		return RemoveAction(ids...)
	}
}

// checkStep checks the reducer's invariants between prev and next, for the
// action a that led from one to the other. It returns a description of the
// first violation, or "".
func checkStep(prev, next Snapshot, a Action) string {
	for id, m := range next.Tasks {
		if m.ID != id {
			return "record " + m.ID + " stored under key " + id
		}
		if err := m.Validate(); err != nil {
			return "invalid record stored: " + err.Error()
		}
	}
	for id, p := range prev.Tasks {
		n, ok := next.Tasks[id]
		if !ok {
			switch a.Op {
			case OpUpsert:
				return "upsert removed " + id
			case OpRemove:
				if !p.Status.IsTerminal() {
					return "remove dropped non-terminal " + id
				}
			}
			continue
		}
		switch {
		case p.Status.IsTerminal() && !terminalKept(p, n):
			return "terminal record " + id + " changed what was set"
		case n.Status.Rank() < p.Status.Rank():
			return "status of " + id + " went back from " + string(p.Status) + " to " + string(n.Status)
		case n.Attempt < p.Attempt:
			return "attempt of " + id + " decreased"
		case n.Owner != p.Owner:
			return "owner of " + id + " changed"
		case !p.CreatedAt.IsZero() && !n.CreatedAt.Equal(p.CreatedAt):
			return "CreatedAt of " + id + " changed"
		case !p.StartedAt.IsZero() && !n.StartedAt.Equal(p.StartedAt):
			return "StartedAt of " + id + " changed"
		case !p.FinishedAt.IsZero() && !n.FinishedAt.Equal(p.FinishedAt):
			return "FinishedAt of " + id + " changed"
		case n.Type != p.Type || n.Name != p.Name || n.Parent != p.Parent || n.Detached != p.Detached:
			return "identity of " + id + " changed"
		case p.Announced && !n.Announced:
			return "Announced of " + id + " was cleared"
		case !p.Announced && n.Announced && a.Op == OpUpsert && !a.Tasks[0].Announced:
			return "an upsert without Announced marked " + id
		case !n.Status.IsTerminal() && !n.FinishedAt.IsZero() && p.FinishedAt.IsZero():
			return "non-terminal " + id + " got a FinishedAt"
		}
	}
	for id, n := range next.Tasks {
		switch {
		case n.Input != nil && n.Status != bgtype.StatusAwaitingInput:
			return "record " + id + " keeps an input request while " + string(n.Status)
		case n.Announced && !n.Status.IsTerminal():
			return "live record " + id + " is announced"
		case a.At.IsZero() || a.Op != OpUpsert || id != a.Tasks[0].ID:
		case reflect.DeepEqual(prev.Tasks[id], n):
		case n.CreatedAt.IsZero(), n.Status != bgtype.StatusQueued && n.StartedAt.IsZero(), n.Status.IsTerminal() && n.FinishedAt.IsZero():
			return "upsert at " + a.At.String() + " left a stamp of " + id + " zero"
		}
	}
	switch a.Op {
	case OpUpsert:
		for id, n := range next.Tasks {
			p, ok := prev.Tasks[id]
			if id != a.Tasks[0].ID && (!ok || !reflect.DeepEqual(p, n)) {
				return "upsert of " + a.Tasks[0].ID + " touched " + id
			}
		}
	case OpRemove:
		for id, n := range next.Tasks {
			if p, ok := prev.Tasks[id]; !ok || !reflect.DeepEqual(p, n) {
				return "remove touched " + id
			}
		}
	case OpAnnounce:
		if len(next.Tasks) != len(prev.Tasks) {
			return "announce added or removed a record"
		}
		for id, n := range next.Tasks {
			p, ok := prev.Tasks[id]
			p.Announced = p.Announced || n.Status.IsTerminal() && slices.Contains(a.IDs, id)
			if !ok || !reflect.DeepEqual(p, n) {
				return "announce of " + strings.Join(a.IDs, ",") + " changed " + id + " beyond its mark"
			}
		}
	case OpReplaceAll:
		given := map[string]bool{}
		for _, t := range a.Tasks {
			given[t.ID] = true
		}
		for id := range next.Tasks {
			if !given[id] {
				return "replace_all kept " + id + ", which it was not given"
			}
		}
	}
	return ""
}

// terminalKept reports whether n, the record after an action, keeps every
// field that the terminal record p had set.
func terminalKept(p, n bgtype.TaskMeta) bool {
	kept := func(was, is string) bool { return was == "" || was == is }
	return n.Status == p.Status && n.Attempt == p.Attempt && n.Input == nil &&
		kept(p.Description, n.Description) && kept(p.Error, n.Error) && kept(p.Stack, n.Stack) &&
		kept(p.Instance, n.Instance) && (p.Result == nil || bytes.Equal(p.Result, n.Result))
}

func FuzzApply(f *testing.F) {
	f.Add([]byte{})
	// queued -> running -> completed -> failed (dropped)
	f.Add([]byte{0, 0, 8, 8, 0, 0, 0, 0, 9, 8, 1, 0, 0, 0, 10, 10, 9, 0, 0, 0, 11, 0, 141, 0})
	// running on attempt 2, completed on attempt 0 (dropped), then on attempt 2
	f.Add([]byte{0, 0, 25, 0, 1, 0, 0, 0, 10, 2, 5, 0, 0, 0, 26, 2, 5, 0})
	// two records, replace_all with a merge, then remove both
	f.Add([]byte{0, 0, 9, 0, 1, 0, 0, 1, 10, 2, 5, 0, 6, 1, 9, 0, 1, 0x10, 7, 0, 0x28, 0, 0, 0})
	// a completed record announced, then an announce of a live one (dropped)
	f.Add([]byte{0, 0, 10, 0, 1, 0, 11, 0, 0, 0, 0, 0, 0, 1, 9, 0, 1, 0, 11, 1, 0, 0, 0, 0})
	// invalid records and another owner's update
	f.Add([]byte{0, 0, 9, 0, 1, 0, 0, 8, 9, 0, 1, 0, 0, 0, 14, 0, 0, 0, 0, 0, 10, 4, 0, 0, 0, 4, 10, 2, 5, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		// Three ids reach every state within a few dozen steps; longer
		// inputs only slow the fuzzer's minimization down.
		if len(data) > fzMaxSteps*fzStep {
			data = data[:fzMaxSteps*fzStep]
		}
		var s Snapshot
		for i := 0; i+fzStep <= len(data); i += fzStep {
			step := data[i : i+fzStep]
			a := fzAction(step)
			prev := cloneSnapshot(s)
			Apply(&s, a)
			if msg := checkStep(prev, s, a); msg != "" {
				t.Fatalf("step %d (% x) %+v: %s\nprev %+v\nnext %+v", i/fzStep, step, a, msg, prev.Tasks, s.Tasks)
			}
			// The reducer keeps no reference to the action's bytes.
			after := cloneSnapshot(s)
			for _, m := range a.Tasks {
				for j := range m.Result {
					m.Result[j] = 'X'
				}
			}
			if !reflect.DeepEqual(after, s) {
				t.Fatalf("step %d: the snapshot shares bytes with the action", i/fzStep)
			}
		}
	})
}

// compactOrNil compacts JSON, keeping nil as nil.
func compactOrNil(t *testing.T, r json.RawMessage) string {
	t.Helper()
	if r == nil {
		return "<nil>"
	}
	var b bytes.Buffer
	if err := json.Compact(&b, r); err != nil {
		t.Fatalf("stored JSON %q is not valid: %v", r, err)
	}
	return b.String()
}

// sameMeta reports whether a and b are the same record, with times compared
// as instants and results compared as compact JSON.
func sameMeta(t *testing.T, a, b bgtype.TaskMeta) bool {
	t.Helper()
	if !a.CreatedAt.Equal(b.CreatedAt) || !a.StartedAt.Equal(b.StartedAt) || !a.FinishedAt.Equal(b.FinishedAt) ||
		compactOrNil(t, a.Result) != compactOrNil(t, b.Result) {
		return false
	}
	a.CreatedAt, a.StartedAt, a.FinishedAt, a.Result = time.Time{}, time.Time{}, time.Time{}, nil
	b.CreatedAt, b.StartedAt, b.FinishedAt, b.Result = time.Time{}, time.Time{}, time.Time{}, nil
	return reflect.DeepEqual(a, b)
}

func FuzzSnapshotJSON(f *testing.F) {
	full, _ := json.Marshal(Snapshot{Tasks: snapOf(fullMeta())})
	f.Add(full)
	f.Add([]byte(`{"tasks":{"task_a":{"task_id":"task_a","owner":"o","status":"running"}}}`))
	f.Add([]byte(`{"tasks":{"task_a":{"owner":"o","status":"running"}}}`))
	f.Add([]byte(`{"tasks":{"task_a":{"task_id":"task_a","owner":"o","status":"zombie"}}}`))
	f.Add([]byte(`{"tasks":{"task_a":{"task_id":"task_a","owner":"o","status":"completed","result": { "a" : [1, 2] },"finished_at":"2025-01-02T03:04:05.123+01:00"}}}`))
	f.Add([]byte(`{"tasks":{"task_a":{"task_id":"task_a","owner":"o","stat`))
	f.Add([]byte(`{"tasks":{"task_a":{"task_id":"task_a","owner":"o","status":"queued","attempt":2,"resume":{"kind":"crawl/v1","spec":{"u":1},"max_attempts":3,"checkpoint":[1],"yields":1}}}}`))
	f.Add([]byte(`{"tasks":{"task_a":{"task_id":"task_a","owner":"o","status":"queued","resume":{"kind":"","spec":{},"max_attempts":3}}}}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var s Snapshot
		err := json.Unmarshal(data, &s)
		if err != nil {
			if json.Valid(data) && !errors.Is(err, bgtype.ErrCorrupt) {
				t.Fatalf("valid JSON refused with %v, want ErrCorrupt", err)
			}
			return
		}
		if s.Tasks == nil {
			t.Fatal("decoded snapshot has a nil map")
		}
		for id, m := range s.Tasks {
			if m.ID == "" || m.ID != id || m.Owner == "" || !m.Status.Valid() || m.Attempt < 0 {
				t.Fatalf("accepted a bad record under %q: %+v", id, m)
			}
		}
		b1, err := json.Marshal(s)
		if err != nil {
			t.Fatalf("re-marshal: %v", err)
		}
		var s2 Snapshot
		if err := json.Unmarshal(b1, &s2); err != nil {
			t.Fatalf("decode of own output %s: %v", b1, err)
		}
		if len(s2.Tasks) != len(s.Tasks) {
			t.Fatalf("round trip: %d records, want %d", len(s2.Tasks), len(s.Tasks))
		}
		for id, m := range s.Tasks {
			if !sameMeta(t, m, s2.Tasks[id]) {
				t.Fatalf("round trip of %s:\n got  %+v\n want %+v", id, s2.Tasks[id], m)
			}
		}
		b2, err := json.Marshal(s2)
		if err != nil || !bytes.Equal(b1, b2) {
			t.Fatalf("second marshal differs:\n%s\n%s (%v)", b1, b2, err)
		}
	})
}

// eventProjection is what MarshalJSON writes for e's kind.
func eventProjection(t *testing.T, e bgtype.Event) bgtype.Event {
	p := bgtype.Event{Kind: e.Kind, TaskID: e.TaskID}
	raw := func(r json.RawMessage) json.RawMessage {
		if r == nil {
			return nil
		}
		return json.RawMessage(compactOrNil(t, r))
	}
	switch e.Kind {
	case bgtype.EventCompleted:
		p.Result = raw(e.Result)
	case bgtype.EventFailed, bgtype.EventInterrupted:
		p.Error = e.Error
	case bgtype.EventCustom:
		p.EventType, p.Payload = e.EventType, raw(e.Payload)
	case bgtype.EventCommitFailed:
		p.Status, p.Error = e.Status, e.Error
	}
	return p
}

func FuzzEventJSON(f *testing.F) {
	for _, s := range []string{
		`{"kind":"completed","task_id":"task_1","result":{"score":3.125}}`,
		`{"kind":"completed","task_id":"task_1","result":null}`,
		`{"kind":"failed","task_id":"task_1","error":"disk full"}`,
		`{"kind":"cancelled","task_id":"task_1","error":"ignored"}`,
		`{"kind":"custom","task_id":"task_1","event_type":"progress","payload": { "pct" : 50 }}`,
		`{"kind":"commit_failed","task_id":"task_1","status":"completed","error":"store down"}`,
		`{"kind":"exploded","task_id":"task_1"}`,
		`{"kind":"custom","task_id":"task_1"}`,
		`{"kind":"completed","task_id":"ta`,
		`[]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var e bgtype.Event
		err := json.Unmarshal(data, &e)
		if err != nil {
			if json.Valid(data) && !errors.Is(err, bgtype.ErrInvalidEvent) {
				t.Fatalf("valid JSON refused with %v, want ErrInvalidEvent", err)
			}
			return
		}
		if e.TaskID == "" || (e.Kind == bgtype.EventCustom && e.EventType == "") {
			t.Fatalf("accepted a bad event: %#v", e)
		}
		if e.Kind != bgtype.EventCommitFailed && !e.Kind.IsTerminal() && e.Kind != bgtype.EventCustom {
			t.Fatalf("accepted an unknown kind: %#v", e)
		}
		if e.Status != "" && !e.Status.Valid() {
			t.Fatalf("accepted an unknown status: %#v", e)
		}
		b1, err := json.Marshal(e)
		if err != nil {
			t.Fatalf("re-marshal of %#v: %v", e, err)
		}
		var e2 bgtype.Event
		if err := json.Unmarshal(b1, &e2); err != nil {
			t.Fatalf("decode of own output %s: %v", b1, err)
		}
		if want := eventProjection(t, e); !reflect.DeepEqual(e2, want) {
			t.Fatalf("round trip of %s:\n got  %#v\n want %#v", b1, e2, want)
		}
		b2, err := json.Marshal(e2)
		if err != nil || !bytes.Equal(b1, b2) {
			t.Fatalf("second marshal differs:\n%s\n%s (%v)", b1, b2, err)
		}
	})
}

// The fuzz oracle itself must catch each kind of violation.
func TestCheckStepDetectsViolations(t *testing.T) {
	t.Parallel()
	run := bgtype.TaskMeta{ID: "task_a", Owner: "o", Status: bgtype.StatusRunning, Attempt: 2, CreatedAt: rt0, StartedAt: rt1, Type: "t"}
	done := with(run, func(m *bgtype.TaskMeta) { m.Status, m.FinishedAt = bgtype.StatusCompleted, rt2 })
	other := rmeta("task_b", "o", bgtype.StatusRunning)
	snap := func(ms ...bgtype.TaskMeta) Snapshot { return Snapshot{Tasks: snapOf(ms...)} }
	up := UpsertAction(run)
	tests := []struct {
		name       string
		prev, next Snapshot
		a          Action
	}{
		{"terminal error rewritten", snap(with(done, func(m *bgtype.TaskMeta) { m.Error = "x" })), snap(with(done, func(m *bgtype.TaskMeta) { m.Error = "y" })), up},
		{"terminal result rewritten", snap(with(done, func(m *bgtype.TaskMeta) { m.Result = json.RawMessage(`1`) })),
			snap(with(done, func(m *bgtype.TaskMeta) { m.Result = json.RawMessage(`2`) })), up},
		{"terminal status changed", snap(done), snap(with(done, func(m *bgtype.TaskMeta) { m.Status = bgtype.StatusFailed })), up},
		{"terminal attempt raised", snap(done), snap(with(done, func(m *bgtype.TaskMeta) { m.Attempt = 3 })), up},
		{"request kept while running", snap(run), snap(with(run, func(m *bgtype.TaskMeta) { m.Input = &bgtype.InputRequest{ID: "r"} })), up},
		{"stamp left zero under a commit time", snap(), snap(with(done, func(m *bgtype.TaskMeta) { m.FinishedAt = time.Time{} })),
			Action{Op: OpUpsert, Tasks: []bgtype.TaskMeta{done}, At: rt3}},
		{"status back", snap(run), snap(with(run, func(m *bgtype.TaskMeta) { m.Status = bgtype.StatusQueued })), up},
		{"attempt down", snap(run), snap(with(run, func(m *bgtype.TaskMeta) { m.Attempt = 1 })), up},
		{"owner changed", snap(run), snap(with(run, func(m *bgtype.TaskMeta) { m.Owner = "p" })), up},
		{"created changed", snap(run), snap(with(run, func(m *bgtype.TaskMeta) { m.CreatedAt = rt3 })), up},
		{"started changed", snap(run), snap(with(run, func(m *bgtype.TaskMeta) { m.StartedAt = rt3 })), up},
		{"finished changed", snap(with(run, func(m *bgtype.TaskMeta) { m.FinishedAt = rt2 })), snap(with(run, func(m *bgtype.TaskMeta) { m.FinishedAt = rt3 })), up},
		{"identity changed", snap(run), snap(with(run, func(m *bgtype.TaskMeta) { m.Type = "u" })), up},
		{"running got finished", snap(run), snap(with(run, func(m *bgtype.TaskMeta) { m.FinishedAt = rt3 })), up},
		{"invalid stored", snap(), snap(rmeta("task_a", "o", "zombie")), up},
		{"wrong key", snap(), Snapshot{Tasks: map[string]bgtype.TaskMeta{"task_x": run}}, up},
		{"upsert removed", snap(run, other), snap(run), up},
		{"upsert touched another", snap(run, other), snap(run, with(other, func(m *bgtype.TaskMeta) { m.Description = "x" })), up},
		{"remove dropped live", snap(run), snap(), RemoveAction("task_a")},
		{"remove touched", snap(run), snap(with(run, func(m *bgtype.TaskMeta) { m.Description = "x" })), RemoveAction("task_a")},
		{"replace_all kept extra", snap(run, other), snap(run, other), ReplaceAllAction(run)},
	}
	for _, tc := range tests {
		if msg := checkStep(tc.prev, tc.next, tc.a); msg == "" {
			t.Errorf("%s: not detected", tc.name)
		}
	}
	if msg := checkStep(snap(run), snap(done), UpsertAction(done)); msg != "" {
		t.Errorf("a legal step flagged: %s", msg)
	}
	if msg := checkStep(snap(done), snap(with(done, func(m *bgtype.TaskMeta) { m.Result = json.RawMessage(`1`) })), up); msg != "" {
		t.Errorf("an enrichment flagged: %s", msg)
	}
}

// clone returns a deep copy of s.
func cloneSnapshot(s Snapshot) Snapshot {
	c := Snapshot{Tasks: maps.Clone(s.Tasks)}
	for id, m := range c.Tasks {
		c.Tasks[id] = m.Clone()
	}
	return c
}
