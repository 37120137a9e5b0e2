package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/bgtask/bgtask/examples/server/internal/scripted"
)

// childEnv makes the test binary run the server (serverMain) instead of
// the tests: the end-to-end tests start it as a separate process, built
// with the same flags (the race detector included), and kill it with -9.
const childEnv = "BGTASK_SERVER_CHILD"

// script is the test's side of the scripted model that the servers under
// test call: it holds the research steps and turns the test names until
// the test lets them go, and says when they arrived.
type script struct {
	mu       sync.Mutex
	research map[string]*gate // topic: its steps wait for release
	lookups  map[string]*gate // query: its call waits for release
	turns    map[string]*gate // command: its call after the tools answered waits until the server gives up
	paused   map[string]*gate // command: its call after the tools answered waits for release
	failing  map[string]bool  // command: its call after the tools answered fails
}

// gate is one held call. reached is closed when the call first arrives;
// closing release lets held research steps go on.
type gate struct {
	reached chan struct{}
	release chan struct{}
	once    sync.Once
}

func newGate() *gate { return &gate{reached: make(chan struct{}), release: make(chan struct{})} }

func (g *gate) arrive() { g.once.Do(func() { close(g.reached) }) }

// newModel serves a scripted model for the servers of one test.
func newModel(t *testing.T) (*script, string) {
	s := &script{research: map[string]*gate{}, lookups: map[string]*gate{}, turns: map[string]*gate{}, paused: map[string]*gate{}, failing: map[string]bool{}}
	srv := httptest.NewServer(&scripted.Model{Hooks: scripted.Hooks{Research: s.onResearch, Lookup: s.onLookup, Turn: s.onTurn}})
	t.Cleanup(srv.Close)
	return s, srv.URL + "/v1"
}

// holdResearch holds every step of the research of topic until the gate is
// released.
func (s *script) holdResearch(topic string) *gate {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := newGate()
	s.research[topic] = g
	return g
}

// holdLookup holds the lookup of query until the gate is released.
func (s *script) holdLookup(query string) *gate {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := newGate()
	s.lookups[query] = g
	return g
}

// holdTurn holds the model call that follows the tool answers of command
// until the server gives the call up (its client left, or the user stopped
// the turn).
func (s *script) holdTurn(command string) *gate {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := newGate()
	s.turns[command] = g
	return g
}

// failTurn fails every model call that follows the tool answers of
// command: the turn ends without an answer (aborted).
func (s *script) failTurn(command string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failing[command] = true
}

// pauseTurn holds the model call that follows the tool answers of command
// until the gate is released (or the server gives the call up): the turn
// stays open meanwhile, its tools' tasks spawned.
func (s *script) pauseTurn(command string) *gate {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := newGate()
	s.paused[command] = g
	return g
}

func (s *script) onResearch(ctx context.Context, topic string, _, _ int) error {
	s.mu.Lock()
	g := s.research[topic]
	s.mu.Unlock()
	return g.pass(ctx)
}

func (s *script) onLookup(ctx context.Context, query string) error {
	s.mu.Lock()
	g := s.lookups[query]
	s.mu.Unlock()
	return g.pass(ctx)
}

// pass holds a call at g until g is released or the call's ctx ends; a nil
// g lets it pass at once.
func (g *gate) pass(ctx context.Context) error {
	if g == nil {
		return nil
	}
	g.arrive()
	select {
	case <-g.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *script) onTurn(ctx context.Context, command string, afterTools bool) error {
	s.mu.Lock()
	g, paused, failing := s.turns[command], s.paused[command], s.failing[command]
	s.mu.Unlock()
	if failing && afterTools {
		return errors.New("the scripted model is down")
	}
	if paused != nil && afterTools {
		return paused.pass(ctx)
	}
	if g == nil || !afterTools {
		return nil
	}
	g.arrive()
	<-ctx.Done()
	return ctx.Err()
}

// logLine is one JSON line of a server's log.
type logLine map[string]any

func (l logLine) str(key string) string { s, _ := l[key].(string); return s }

// proc is a server process under test. Its log (stderr) is read as it
// comes: the server tells the test there what happened (listening, turns,
// task transitions, wakes), and the test waits on it.
type proc struct {
	cmd    *exec.Cmd
	url    string
	client *http.Client

	mu      sync.Mutex
	lines   []logLine
	raw     []string
	changed chan struct{} // closed (and replaced) at each new line
	exited  chan struct{} // closed once the process has exited and its log is read
	errorOK []string      // the msgs of the ERROR lines the test expects (expectError)
}

// expectError lets the server log ERROR lines with message msg: the test
// causes them.
func (p *proc) expectError(msg string) {
	p.mu.Lock()
	p.errorOK = append(p.errorOK, msg)
	p.mu.Unlock()
}

// expectedError reports whether the raw log line l is an ERROR line the
// test expects. Called with p.mu held.
func (p *proc) expectedError(l string) bool {
	return slices.ContainsFunc(p.errorOK, func(msg string) bool { return strings.Contains(l, `"msg":"`+msg+`"`) })
}

// startServer starts a server on a free port with args, stopped with
// SIGTERM when the test ends (unless the test killed it).
func startServer(t *testing.T, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"-addr", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(os.Environ(), childEnv+"=1")
	dieWithParent(cmd)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, changed: make(chan struct{}), exited: make(chan struct{}),
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
	go p.read(stderr)
	t.Cleanup(func() {
		p.client.CloseIdleConnections()
		p.stop(t)
	})
	l := p.waitLine(t, "the server listening", func(l logLine) bool { return l.str("msg") == "listening" })
	p.url = l.str("url")
	return p
}

// read collects the log until the process exits.
func (p *proc) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		var l logLine
		_ = json.Unmarshal(sc.Bytes(), &l)
		p.mu.Lock()
		p.raw = append(p.raw, sc.Text())
		if l != nil {
			p.lines = append(p.lines, l)
		}
		close(p.changed)
		p.changed = make(chan struct{})
		p.mu.Unlock()
	}
	_ = p.cmd.Wait()
	close(p.exited)
}

// waitLog waits until cond holds of the log so far (it is called again at
// each new line), and fails the test if the process exits first.
//
// It has no time limit of its own: if the test binary's deadline (go test
// -timeout) comes near first, it fails with the server's log, rather than
// leave the binary to panic without it.
func (p *proc) waitLog(t *testing.T, what string, cond func([]logLine) bool) {
	t.Helper()
	var near <-chan time.Time
	if d, ok := t.Deadline(); ok {
		tm := time.NewTimer(time.Until(d) - time.Until(d)/10)
		defer tm.Stop()
		near = tm.C
	}
	for {
		p.mu.Lock()
		ok, changed := cond(p.lines), p.changed
		p.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-changed:
		case <-near:
			t.Fatalf("still waiting for %s as the test's deadline nears:\n%s", what, p.tail())
		case <-p.exited:
			p.mu.Lock()
			ok = cond(p.lines)
			p.mu.Unlock()
			if !ok {
				t.Fatalf("the server exited before %s:\n%s", what, p.tail())
			}
			return
		}
	}
}

// waitLine waits for a line for which match holds and returns it.
func (p *proc) waitLine(t *testing.T, what string, match func(logLine) bool) logLine {
	t.Helper()
	var found logLine
	p.waitLog(t, what, func(lines []logLine) bool {
		for _, l := range lines {
			if match(l) {
				found = l
				return true
			}
		}
		return false
	})
	return found
}

// waitWake waits for the server's wake of thread for the end of task
// (kind), logged when the event arrived between turns.
// It fails at once if the task's end woke the thread with another kind.
func (p *proc) waitWake(t *testing.T, thread, task, kind string) {
	t.Helper()
	l := p.waitLine(t, fmt.Sprintf("the wake of %s for the end of %s", thread, task), func(l logLine) bool {
		return l.str("msg") == "wake" && l.str("thread") == thread && l.str("task_id") == task && isEnd(l.str("kind"))
	})
	if l.str("kind") != kind {
		t.Fatalf("%s woke %s with %s, want %s", task, thread, l.str("kind"), kind)
	}
}

func isEnd(kind string) bool {
	return kind == "completed" || kind == "failed" || kind == "cancelled" || kind == "interrupted"
}

// tail is the end of the server's log, for a failure message: from its first
// race report, if it has one.
func (p *proc) tail() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	from := max(0, len(p.raw)-40)
	for i, l := range p.raw { // a race report whole: its first stack is far above the end
		if strings.Contains(l, "WARNING: DATA RACE") {
			from = min(from, max(0, i-2))
			break
		}
	}
	return strings.Join(p.raw[from:], "\n")
}

// stop ends the server with SIGTERM and checks it stopped cleanly, with no
// race or panic in its log; after kill it only checks the log.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	select {
	case <-p.exited:
	default:
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		<-p.exited
		if code := p.cmd.ProcessState.ExitCode(); code != 0 {
			t.Errorf("the server exited with status %d:\n%s", code, p.tail())
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.raw {
		if strings.Contains(l, "DATA RACE") || strings.HasPrefix(l, "panic:") || strings.Contains(l, `"level":"ERROR"`) && !p.expectedError(l) {
			t.Errorf("the server's log has %q", l)
		}
	}
}

// kill kills the server with SIGKILL and waits until it is gone.
func (p *proc) kill(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-p.exited
	if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("the server was not killed: %v", p.cmd.ProcessState)
	}
}

// do sends a request and returns the status and body.
func (p *proc) do(ctx context.Context, method, path, body string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, p.url+path, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := p.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// post runs one turn of thread and returns its result; anything but 200 is
// an error.
func (p *proc) post(ctx context.Context, thread, text string) (turnResult, error) {
	body, _ := json.Marshal(map[string]string{"text": text})
	code, b, err := p.do(ctx, http.MethodPost, "/threads/"+thread+"/messages", string(body))
	if err != nil {
		return turnResult{}, err
	}
	if code != http.StatusOK {
		return turnResult{}, fmt.Errorf("POST %s %q: %d %s", thread, text, code, b)
	}
	var res turnResult
	if err := json.Unmarshal(b, &res); err != nil {
		return turnResult{}, fmt.Errorf("POST %s %q: %v: %s", thread, text, err, b)
	}
	return res, nil
}

// mustPost is post that fails the test on an error.
func (p *proc) mustPost(t *testing.T, thread, text string) turnResult {
	t.Helper()
	res, err := p.post(t.Context(), thread, text)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// threadTasks is GET /threads/{id}/tasks.
type threadTasks struct {
	Thread  string     `json:"thread"`
	Live    bool       `json:"live"`
	News    int        `json:"news"`
	Running bool       `json:"turn_running"`
	Tasks   []taskView `json:"tasks"`
}

func (p *proc) tasks(t *testing.T, thread string) threadTasks {
	t.Helper()
	code, b, err := p.do(t.Context(), http.MethodGet, "/threads/"+thread+"/tasks", "")
	if err != nil || code != http.StatusOK {
		t.Fatalf("GET %s tasks: %d %s %v", thread, code, b, err)
	}
	var out threadTasks
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// event is a delivered event, as the turn result shows it.
type event struct {
	Kind      string          `json:"kind"`
	TaskID    string          `json:"task_id"`
	Name      string          `json:"name"`
	EventType string          `json:"event_type"`
	Result    json.RawMessage `json:"result"`
	Error     string          `json:"error"`
	ErrorKind string          `json:"error_kind"`
	Reason    string          `json:"reason"`
}

// ends returns the terminal events of a turn, as "kind task_id" strings in
// order.
func ends(t *testing.T, res turnResult) []string {
	t.Helper()
	var out []string
	for _, ev := range endEvents(t, res) {
		out = append(out, ev.Kind+" "+ev.TaskID)
	}
	return out
}

// endEvents returns the terminal events of a turn, in order.
func endEvents(t *testing.T, res turnResult) []event {
	t.Helper()
	var out []event
	for _, raw := range res.Events {
		var ev event
		if err := json.Unmarshal(raw, &ev); err != nil {
			t.Fatal(err)
		}
		switch ev.Kind {
		case "completed", "failed", "cancelled", "interrupted":
			out = append(out, ev)
		}
	}
	return out
}

// startedTask returns the task id a research call of res answered with.
func startedTask(t *testing.T, res turnResult, topic string) string {
	t.Helper()
	for _, c := range res.Calls {
		var args struct{ Topic string }
		var ans struct {
			Status string `json:"status"`
			TaskID string `json:"task_id"`
		}
		if c.Name != "research" || json.Unmarshal([]byte(c.Arguments), &args) != nil || args.Topic != topic {
			continue
		}
		if err := json.Unmarshal([]byte(c.Answer), &ans); err != nil || ans.Status != "started" {
			t.Fatalf("research %s answered %s", topic, c.Answer)
		}
		return ans.TaskID
	}
	t.Fatalf("no research call for %s in %+v", topic, res)
	return ""
}

// statuses returns task id -> status of a thread's tasks.
func statuses(tt threadTasks) map[string]string {
	out := map[string]string{}
	for _, task := range tt.Tasks {
		out[task.ID] = string(task.Status)
	}
	return out
}
