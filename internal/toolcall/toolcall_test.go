package toolcall

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"go.uber.org/goleak"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/agent"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// notMistake has a method ModelMistake that says no.
type notMistake struct{}

func (notMistake) Error() string      { return "not a mistake" }
func (notMistake) ModelMistake() bool { return false }

// The model's mistakes are bgtask's, a spawn's refusals of what the model
// chose and the marked errors; ctx's errors, nil and the rest are not.
func TestIsModelMistake(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"plain", errors.New("disk full"), false},
		{"closed", bgtask.ErrClosed, false},
		{"fs", fs.ErrNotExist, false},
		{"tool arguments", fmt.Errorf("x: %w", agent.ErrToolArguments), true},
		{"not found", fmt.Errorf("x: %w", bgtask.ErrNotFound), true},
		{"no current task", agent.ErrNoCurrentTask, true},
		{"duplicate name", fmt.Errorf("x: %w", bgtask.ErrDuplicateName), true},
		{"invalid argument", bgtask.ErrInvalidArgument, true},
		{"limit", bgtask.ErrLimit, true},
		{"fan-out limit", bgtask.ErrLimit, true},
		{"depth limit", bgtask.ErrLimit, true},
		{"marked", MarkModelError(errors.New("no such place")), true},
		{"marked, wrapped", fmt.Errorf("start_job: %w", MarkModelError(errors.New("no such place"))), true},
		{"method says no", notMistake{}, false},
		{"canceled", context.Canceled, false},
		{"deadline", fmt.Errorf("x: %w", context.DeadlineExceeded), false},
		{"marked canceled", MarkModelError(context.Canceled), false},
		{"limit and canceled", errors.Join(bgtask.ErrLimit, context.Canceled), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := IsModelMistake(tc.err); got != tc.want {
				t.Errorf("IsModelMistake(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}

// MarkModelError keeps the error's text and chain, and leaves nil nil.
func TestMarkModelError(t *testing.T) {
	if err := MarkModelError(nil); err != nil {
		t.Errorf("MarkModelError(nil) = %v, want nil", err)
	}
	inner := &fs.PathError{Op: "open", Path: "x", Err: fs.ErrNotExist}
	err := MarkModelError(inner)
	var pe *fs.PathError
	if err.Error() != "open x: file does not exist" || !errors.Is(err, fs.ErrNotExist) || !errors.As(err, &pe) || pe != inner {
		t.Errorf("MarkModelError: %q, Is %v, As %v", err, errors.Is(err, fs.ErrNotExist), pe)
	}
}

// script is a tool whose calls answer as their args say: "ok" returns the
// call id as result, "mistake" a model's mistake, "fail" a host error,
// "panic" panics, "block" waits to be released. It records what ran.
type script struct {
	mu       sync.Mutex
	ran      []string // the calls' ids, in the order they started
	lineages map[string]bgtask.ToolCall
	release  map[string]chan struct{}
	freed    map[string]bool // the release channels closed

	running, most atomic.Int32
}

func newScript() *script {
	return &script{lineages: map[string]bgtask.ToolCall{}, release: map[string]chan struct{}{}, freed: map[string]bool{}}
}

func (s *script) tool() agent.Tool {
	return agent.Tool{Name: "job", Call: func(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
		lineage, _ := bgtask.ToolCallFromContext(ctx)
		s.mu.Lock()
		s.ran = append(s.ran, lineage.CallID)
		s.lineages[lineage.CallID] = lineage
		ch := s.release[lineage.CallID]
		s.mu.Unlock()
		n := s.running.Add(1)
		defer s.running.Add(-1)
		for {
			if m := s.most.Load(); n <= m || s.most.CompareAndSwap(m, n) {
				break
			}
		}
		switch string(args) {
		case `"mistake"`:
			return nil, fmt.Errorf("job: %w", bgtask.ErrDuplicateName)
		case `"fail"`:
			return nil, errors.New("store down")
		case `"panic"`:
			panic("boom " + lineage.CallID)
		case `"block"`:
			<-ch
		}
		return json.RawMessage(`"` + lineage.CallID + `"`), nil
	}}
}

// calls returns a call per arg, with ids c0, c1...; a "block" call gets a
// release channel.
func (s *script) calls(args ...string) []Call {
	out := make([]Call, len(args))
	for i, a := range args {
		id := fmt.Sprintf("c%d", i)
		if a == "block" {
			s.release[id] = make(chan struct{})
		}
		out[i] = Call{ID: id, Tool: s.tool(), Args: json.RawMessage(`"` + a + `"`)}
	}
	return out
}

func (s *script) started() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.ran)
}

// startedSet returns the ids of the calls started, sorted: calls started
// in parallel start in any order.
func (s *script) startedSet() []string {
	return slices.Sorted(slices.Values(s.started()))
}

// free releases the "block" call id, once.
func (s *script) free(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ch, ok := s.release[id]; ok && !s.freed[id] {
		close(ch)
		s.freed[id] = true
	}
}

// endLast checks, in a synctest bubble, that Answer (done closes when it
// returns) waits for the call id, the last one running, then releases it
// and waits for Answer.
func (s *script) endLast(t *testing.T, done <-chan struct{}, id string) {
	t.Helper()
	synctest.Wait()
	select {
	case <-done:
		t.Fatalf("Answer returned with %s running", id)
	default:
	}
	s.free(id)
	<-done
}

// freeAll releases every "block" call not released yet, so that a failed
// test leaves no call blocked.
func (s *script) freeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, ch := range s.release {
		if !s.freed[id] {
			close(ch)
			s.freed[id] = true
		}
	}
}

func wrap(c Call, err error) error {
	return fmt.Errorf("bgtest: %s (call %s): %w", c.Tool.Name, c.ID, err)
}

// The outcomes keep the calls' order, whatever the parallelism; a host
// error stops the calls not started yet (TextNotRun) and is returned
// wrapped; a model's mistake is answered with its text.
func TestAnswerSerial(t *testing.T) {
	errStore := "bgtest: job (call c2): store down"
	for _, tc := range []struct {
		name     string
		parallel int
		args     []string
		want     []Outcome
		ran      []string
		err      string
	}{
		{"results", 0, []string{"ok", "ok", "ok"},
			[]Outcome{{`"c0"`, false}, {`"c1"`, false}, {`"c2"`, false}}, []string{"c0", "c1", "c2"}, ""},
		{"mistake answered", 1, []string{"ok", "mistake", "ok"},
			[]Outcome{{`"c0"`, false}, {"job: bgtask: a non-terminal task with this name already exists", true}, {`"c2"`, false}}, []string{"c0", "c1", "c2"}, ""},
		{"host error stops the rest", 1, []string{"ok", "mistake", "fail", "ok", "ok"},
			[]Outcome{{`"c0"`, false}, {"job: bgtask: a non-terminal task with this name already exists", true}, {TextFailed, true}, {TextNotRun, true}, {TextNotRun, true}}, []string{"c0", "c1", "c2"}, errStore},
		{"one call, parallel", 4, []string{"fail"},
			[]Outcome{{TextFailed, true}}, []string{"c0"}, "bgtest: job (call c0): store down"},
		{"parallel, no blocking", 3, []string{"ok", "ok", "ok", "ok"},
			[]Outcome{{`"c0"`, false}, {`"c1"`, false}, {`"c2"`, false}, {`"c3"`, false}}, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newScript()
			got, err := Answer(t.Context(), s.calls(tc.args...), Config{Parallel: tc.parallel, Wrap: wrap})
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("outcomes %+v, want %+v", got, tc.want)
			}
			if tc.ran != nil && !slices.Equal(s.started(), tc.ran) {
				t.Errorf("ran %v, want %v", s.started(), tc.ran)
			}
			switch {
			case tc.err == "" && err != nil:
				t.Errorf("err %v, want nil", err)
			case tc.err != "" && (err == nil || err.Error() != tc.err):
				t.Errorf("err %v, want %q", err, tc.err)
			}
		})
	}
}

// With no Wrap, a host error names the tool and the call; it still
// matches the tool's error.
func TestAnswerDefaultWrap(t *testing.T) {
	s := newScript()
	base := errors.New("store down")
	calls := s.calls("ok")
	calls[0].Tool.Call = func(context.Context, json.RawMessage) (json.RawMessage, error) { return nil, base }
	_, err := Answer(t.Context(), calls, Config{})
	if err == nil || err.Error() != "job (call c0): store down" || !errors.Is(err, base) {
		t.Errorf("err %v, want job (call c0): store down", err)
	}
}

// No calls: nothing, no error. A negative parallelism is refused and runs
// nothing.
func TestAnswerBadInput(t *testing.T) {
	if got, err := Answer(t.Context(), nil, Config{}); got != nil || err != nil {
		t.Errorf("no calls: %v %v, want nil nil", got, err)
	}
	s := newScript()
	got, err := Answer(t.Context(), s.calls("ok"), Config{Parallel: -1})
	if got != nil || !errors.Is(err, bgtask.ErrInvalidArgument) || err.Error() != "toolcall: parallel -1: at least one call at a time: "+bgtask.ErrInvalidArgument.Error() {
		t.Errorf("parallel -1: %v %v", got, err)
	}
	if ran := s.started(); len(ran) != 0 {
		t.Errorf("ran %v, want none", ran)
	}
}

// Each call's ctx carries the lineage: the run and agent ids of Config,
// or else of ctx, and its own call id.
func TestAnswerLineage(t *testing.T) {
	run, agent := "run-2", "agent-2"
	for _, tc := range []struct {
		name   string
		cfg    Config
		run    string
		agent  string
		onCtx  bgtask.ToolCall
		ctxSet bool
	}{
		{"from ctx", Config{}, "run-1", "agent-1", bgtask.ToolCall{RunID: "run-1", AgentID: "agent-1", CallID: "outer"}, true},
		{"from config", Config{RunID: &run, AgentID: &agent}, "run-2", "agent-2", bgtask.ToolCall{RunID: "run-1", AgentID: "agent-1"}, true},
		{"none", Config{}, "", "", bgtask.ToolCall{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			if tc.ctxSet {
				ctx = bgtask.WithToolCall(ctx, tc.onCtx)
			}
			s := newScript()
			tc.cfg.Parallel = 2
			if _, err := Answer(ctx, s.calls("ok", "ok"), tc.cfg); err != nil {
				t.Fatal(err)
			}
			for _, id := range []string{"c0", "c1"} {
				want := bgtask.ToolCall{RunID: tc.run, AgentID: tc.agent, CallID: id}
				if got := s.lineages[id]; got != want {
					t.Errorf("%s: lineage %+v, want %+v", id, got, want)
				}
			}
		})
	}
}

// With Parallel 2, at most two calls run at once, the next starts when one
// ends, and the outcomes keep the calls' order though they end in reverse.
func TestAnswerBoundedParallel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript()
		defer s.freeAll()
		calls := s.calls("block", "block", "block", "block")
		var got []Outcome
		done := make(chan struct{})
		go func() {
			defer close(done)
			var err error
			got, err = Answer(t.Context(), calls, Config{Parallel: 2})
			if err != nil {
				t.Error(err)
			}
		}()
		synctest.Wait()
		if ran := s.startedSet(); !slices.Equal(ran, []string{"c0", "c1"}) {
			t.Fatalf("started %v, want c0 c1", ran)
		}
		s.free("c1")
		synctest.Wait()
		if ran := s.startedSet(); !slices.Equal(ran, []string{"c0", "c1", "c2"}) {
			t.Fatalf("started %v, want c0 c1 c2", ran)
		}
		s.free("c2")
		synctest.Wait()
		if ran := s.startedSet(); !slices.Equal(ran, []string{"c0", "c1", "c2", "c3"}) {
			t.Fatalf("started %v, want c0..c3", ran)
		}
		s.free("c3")
		s.endLast(t, done, "c0")
		want := []Outcome{{`"c0"`, false}, {`"c1"`, false}, {`"c2"`, false}, {`"c3"`, false}}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("outcomes %+v, want %+v", got, want)
		}
		if m := s.most.Load(); m != 2 {
			t.Errorf("at most %d calls at once, want 2", m)
		}
	})
}

// In parallel, a host error stops the calls not started yet; the one
// running finishes and keeps its result.
func TestAnswerParallelHostError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript()
		defer s.freeAll()
		calls := s.calls("block", "fail", "ok", "ok")
		var (
			got []Outcome
			err error
		)
		done := make(chan struct{})
		go func() {
			defer close(done)
			got, err = Answer(t.Context(), calls, Config{Parallel: 2, Wrap: wrap})
		}()
		synctest.Wait()
		s.free("c0")
		<-done
		want := []Outcome{{`"c0"`, false}, {TextFailed, true}, {TextNotRun, true}, {TextNotRun, true}}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("outcomes %+v, want %+v", got, want)
		}
		if err == nil || err.Error() != "bgtest: job (call c1): store down" {
			t.Errorf("err %v, want bgtest: job (call c1): store down", err)
		}
		if ran := s.startedSet(); !slices.Equal(ran, []string{"c0", "c1"}) {
			t.Errorf("ran %v, want c0 c1", ran)
		}
	})
}

// A call's panic in parallel stops the calls not started yet and is raised
// again in Answer's goroutine, only once the running calls have returned.
// Serially, it goes up at once.
func TestAnswerPanic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript()
		defer s.freeAll()
		calls := s.calls("block", "panic", "ok")
		var raised any
		done := make(chan struct{})
		go func() {
			defer close(done)
			defer func() { raised = recover() }()
			Answer(t.Context(), calls, Config{Parallel: 2})
		}()
		s.endLast(t, done, "c0")
		if raised != "boom c1" {
			t.Errorf("panic %v, want boom c1", raised)
		}
		if ran := s.startedSet(); !slices.Equal(ran, []string{"c0", "c1"}) {
			t.Errorf("ran %v, want c0 c1", ran)
		}
	})

	s := newScript()
	func() {
		defer func() {
			if r := recover(); r != "boom c0" {
				t.Errorf("serial panic %v, want boom c0", r)
			}
		}()
		Answer(t.Context(), s.calls("panic", "ok"), Config{})
	}()
	if ran := s.startedSet(); !slices.Equal(ran, []string{"c0"}) {
		t.Errorf("serial: ran %v, want c0", ran)
	}
}

// Validate refuses what an adapter's options may set wrong, naming the
// option after the prefix.
func TestConfigValidate(t *testing.T) {
	blank, tab, ok := " ", "\t", "run-1"
	for _, tc := range []struct {
		name string
		cfg  Config
		want string // "" for nil
	}{
		{"good", Config{Parallel: 1, RunID: &ok, AgentID: &ok}, ""},
		{"parallel 4", Config{Parallel: 4}, ""},
		{"parallel 0", Config{}, "bgx: WithParallel(0): at least one call at a time: bgtask: invalid argument"},
		{"parallel -2", Config{Parallel: -2}, "bgx: WithParallel(-2): at least one call at a time: bgtask: invalid argument"},
		{"blank run", Config{Parallel: 1, RunID: &tab}, "bgx: WithRunID: blank run id: bgtask: invalid argument"},
		{"blank agent", Config{Parallel: 1, AgentID: &blank}, "bgx: WithAgentID: blank agent id: bgtask: invalid argument"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate("bgx")
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("err %v, want nil", err)
			case tc.want != "" && (err == nil || err.Error() != tc.want || !errors.Is(err, bgtask.ErrInvalidArgument)):
				t.Errorf("err %v, want %q", err, tc.want)
			}
		})
	}
}
