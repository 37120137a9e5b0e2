package adaptertest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/agent"
	"github.com/bgtask/bgtask/bgtype"
)

// ToolCall is one tool call a scripted model makes.
type ToolCall struct{ ID, Name, Args string }

// BackgroundScenario is a host tool, "build", that the model may run in the
// background (agent.Background), and a scripted model's turns with it,
// which an adapter's test carries through its framework:
//
//	turn 0: build lib in the foreground: its result is the tool's own;
//	turn 1: build app in the background: a task at once, a notice to come;
//	turn 2: build all in the foreground: it prints two lines and moves
//	        itself to the background (Owner.ToBackground, as a user's key
//	        would): the promotion notice carries what it printed;
//	turn 3: wait_task from the notice's next_offset: it returns the third
//	        line as soon as it is printed;
//	turn 4: get_task from there once the task ended: the fourth line;
//	turn 5: build noisy in the background: it prints more than the
//	        buffer keeps (OutputCap);
//	turn 6: get_task from offset 0 once it ended: the last OutputCap
//	        bytes, and the count of those dropped;
//	turn 7: the final answer, no call.
//
// The model reads the notice's task_id and next_offset from the results it
// got; Check proves every byte printed was seen once, in order.
type BackgroundScenario struct {
	Owner   bgtask.Owner
	CallCtx context.Context // a tool call's ctx in run-1
	Tools   []agent.Tool    // the owner's tools, then build

	inbox *bgtask.Inbox // the owner's: the ends of background tasks
	steps chan string   // the lines build "all" prints after its promotion
	wrote chan struct{} // build "all" printed a line
}

// Turns is how many requests the scenario's model answers.
const Turns = 8

// OutputCap is the scenario's Caps.MaxOutputBytes, and Noisy what build
// noisy prints: more than that.
const OutputCap = 64

var Noisy = strings.Repeat("0123456789", 10)

// FinalAnswer is the scenario model's last reply.
const FinalAnswer = "Built lib, app and all."

// Printed is what build "all" prints, in order.
var Printed = []string{"step 1 <ok>\n", "step 2\n", "step 3\n", "step 4\n"}

// NewBackgroundScenario makes the scenario on a new Manager, shut down when
// the test ends.
func NewBackgroundScenario(t *testing.T) *BackgroundScenario {
	t.Helper()
	m, err := bgtask.New(bgtask.WithCaps(bgtask.Caps{MaxOutputBytes: OutputCap}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Shutdown(context.Background()) })
	s := &BackgroundScenario{Owner: m.Owner("thread-1"), CallCtx: bgtask.WithToolCall(t.Context(), bgtask.ToolCall{RunID: "run-1"}),
		steps: make(chan string), wrote: make(chan struct{})}
	if s.inbox, err = s.Owner.Inbox(); err != nil {
		t.Fatal(err)
	}
	build, err := agent.Background(s.Owner, agent.Tool{
		Name: "build", Description: "Build a target.",
		Schema: json.RawMessage(`{"type":"object","properties":{"target":{"type":"string","description":"What to build."}},"required":["target"],"additionalProperties":false}`),
		Call:   s.build,
	}, agent.BackgroundOptions{Wait: time.Hour}) // promoted by itself, never by the clock
	if err != nil {
		t.Fatal(err)
	}
	s.Tools = append(agent.Tools(s.Owner), build)
	return s
}

// build is the host's tool.
func (s *BackgroundScenario) build(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
	var a struct{ Target string }
	dec := json.NewDecoder(strings.NewReader(string(args)))
	dec.DisallowUnknownFields() // run_in_background never reaches it
	if err := dec.Decode(&a); err != nil {
		return nil, fmt.Errorf("%w: %v", agent.ErrToolArguments, err)
	}
	if a.Target == "noisy" {
		io.WriteString(bgtask.OutputFrom(ctx), Noisy)
	}
	if a.Target == "all" {
		out := bgtask.OutputFrom(ctx)
		io.WriteString(out, Printed[0])
		io.WriteString(out, Printed[1])
		t, _ := bgtask.TaskFromContext(ctx)
		if _, err := s.Owner.ToBackground(ctx, t.ID()); err != nil {
			return nil, err
		}
		for line := range s.steps {
			io.WriteString(out, line)
			s.wrote <- struct{}{}
		}
	}
	return json.Marshal(map[string]string{"built": a.Target})
}

// notice is what the model reads of a promotion notice.
type notice struct {
	Status string `json:"status"`
	TaskID string `json:"task_id"`
	Output struct {
		Text       string `json:"text"`
		NextOffset int64  `json:"next_offset"`
	} `json:"output"`
}

// Calls returns the model's calls at turn i, given the results (tool
// messages) of its previous turn's calls in order; none at the last turn.
// Between turns it drives build "all" as the scenario says.
func (s *BackgroundScenario) Calls(t *testing.T, i int, prev []string) []ToolCall {
	switch i {
	case 0:
		return []ToolCall{{"call_1", "build", `{"target":"lib","run_in_background":false}`}}
	case 1:
		return []ToolCall{{"call_2", "build", `{"target":"app","run_in_background":true}`}}
	case 2:
		return []ToolCall{{"call_3", "build", `{"target":"all","run_in_background":null}`}}
	case 3:
		n := s.read(t, prev)
		s.steps <- Printed[2]
		<-s.wrote
		return []ToolCall{{"call_4", "wait_task", fmt.Sprintf(`{"task_id":%q,"timeout_seconds":60,"output_since":%d}`, n.TaskID, n.Output.NextOffset)}}
	case 4:
		var w struct {
			Task struct {
				TaskID string `json:"task_id"`
			} `json:"task"`
			Output struct {
				NextOffset int64 `json:"next_offset"`
			} `json:"output"`
		}
		if len(prev) != 1 || json.Unmarshal([]byte(prev[0]), &w) != nil {
			t.Errorf("turn 4: results %q", prev)
		}
		s.steps <- Printed[3]
		<-s.wrote
		close(s.steps)
		if _, err := s.Owner.Wait(t.Context(), w.Task.TaskID); err != nil {
			t.Error(err)
		}
		return []ToolCall{{"call_5", "get_task", fmt.Sprintf(`{"task_id":%q,"output_since":%d,"output_tail":null}`, w.Task.TaskID, w.Output.NextOffset)}}
	case 5:
		return []ToolCall{{"call_6", "build", `{"target":"noisy","run_in_background":true}`}}
	case 6:
		var started struct {
			TaskID string `json:"task_id"`
		}
		if len(prev) != 1 || json.Unmarshal([]byte(prev[0]), &started) != nil {
			t.Errorf("turn 6: results %q", prev)
		}
		if _, err := s.Owner.Wait(t.Context(), started.TaskID); err != nil {
			t.Error(err)
		}
		return []ToolCall{{"call_7", "get_task", fmt.Sprintf(`{"task_id":%q,"output_since":0,"output_tail":null}`, started.TaskID)}}
	}
	return nil
}

// read decodes the promotion notice in prev.
func (s *BackgroundScenario) read(t *testing.T, prev []string) notice {
	var n notice
	if len(prev) != 1 || json.Unmarshal([]byte(prev[0]), &n) != nil {
		t.Errorf("turn 3: results %q", prev)
	}
	return n
}

// Check checks the results the model got at each turn (results[i] are the
// results of turn i's calls, as the next request carried them): the
// foreground result, the start notice, the promotion notice, wait_task's
// and get_task's output, every byte printed seen exactly once, in order;
// the overflow with its count of bytes dropped; and the ends of the
// background tasks announced to the owner, once each.
func (s *BackgroundScenario) Check(t *testing.T, results [][]string) {
	t.Helper()
	if len(results) != Turns-1 {
		t.Fatalf("%d turns of results, want %d", len(results), Turns-1)
	}
	for i, r := range results {
		if len(r) != 1 {
			t.Fatalf("turn %d: %d results, want 1", i, len(r))
		}
	}
	if results[0][0] != `{"built":"lib"}` {
		t.Errorf("foreground: %s", results[0][0])
	}
	var started struct {
		Status  string `json:"status"`
		TaskID  string `json:"task_id"`
		Message string `json:"message"`
	}
	if err := json.Unmarshal([]byte(results[1][0]), &started); err != nil || started.Status != "started" ||
		!strings.Contains(started.Message, "You will be notified when it ends: do not poll") {
		t.Errorf("background: %s", results[1][0])
	}
	n := s.read(t, results[2:3][0])
	if n.Status != "promoted" || strings.ContainsAny(results[2][0], "<>") {
		t.Errorf("promotion notice: %s", results[2][0])
	}
	var w, g struct {
		Output struct {
			Text       string `json:"text"`
			Offset     int64  `json:"offset"`
			NextOffset int64  `json:"next_offset"`
			Running    bool   `json:"running"`
		} `json:"output"`
	}
	if err := json.Unmarshal([]byte(results[3][0]), &w); err != nil || !w.Output.Running || w.Output.Offset != n.Output.NextOffset {
		t.Errorf("wait_task: %s", results[3][0])
	}
	if err := json.Unmarshal([]byte(results[4][0]), &g); err != nil || g.Output.Running || g.Output.Offset != w.Output.NextOffset {
		t.Errorf("get_task: %s", results[4][0])
	}
	if seen := n.Output.Text + w.Output.Text + g.Output.Text; seen != strings.Join(Printed, "") {
		t.Errorf("the model saw %q, want %q", seen, strings.Join(Printed, ""))
	}
	var noisy struct {
		Task struct {
			TaskID string `json:"task_id"`
		} `json:"task"`
		Output struct {
			Text         string `json:"text"`
			Offset       int64  `json:"offset"`
			NextOffset   int64  `json:"next_offset"`
			DroppedBytes int64  `json:"dropped_bytes"`
			TotalBytes   int64  `json:"total_bytes"`
		} `json:"output"`
	}
	if err := json.Unmarshal([]byte(results[6][0]), &noisy); err != nil || noisy.Output.Text != Noisy[len(Noisy)-OutputCap:] ||
		noisy.Output.Offset != int64(len(Noisy)-OutputCap) || noisy.Output.DroppedBytes != int64(len(Noisy)-OutputCap) ||
		noisy.Output.NextOffset != int64(len(Noisy)) || noisy.Output.TotalBytes != int64(len(Noisy)) {
		t.Errorf("the overflow: %s", results[6][0])
	}
	meta, err := s.Owner.Wait(t.Context(), started.TaskID)
	if err != nil || meta.Status != bgtype.StatusCompleted || string(meta.Result) != `{"built":"app"}` {
		t.Errorf("build app: %+v, %v", meta, err)
	}
	var ends []string
	for _, ev := range s.inbox.Drain() {
		if ev.Kind.IsTerminal() {
			ends = append(ends, ev.TaskID)
		}
	}
	// Once each; in any order: build app's goroutine may not even have run
	// when the model moved on (nothing waits for it), so its end may come
	// after the others'.
	slices.Sort(ends)
	if want := slices.Sorted(slices.Values([]string{started.TaskID, n.TaskID, noisy.Task.TaskID})); !slices.Equal(ends, want) {
		t.Errorf("ends announced %v, want build app's, build all's and build noisy's once each (%s, %s, %s)", ends, started.TaskID, n.TaskID, noisy.Task.TaskID)
	}
}
