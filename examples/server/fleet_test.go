package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bgtask/bgtask/store/pgstore/pgtest"
)

// The reference server as a fleet (issue 29 §5): three processes on one
// PostgreSQL database, each with its own -instance, behind a round-robin
// reverse proxy with no affinity, so a thread's consecutive turns land on
// different instances. Over 50 threads, in three phases (all three up;
// after a kill -9 of one of them mid-turn; during a rolling restart of all
// three with SIGTERM while turns go on), it checks, exactly:
//
//   - every end of a thread's task is handed to the thread's model once
//     over all its turns (the turn responses list the events the model was
//     handed), and marked heard;
//   - a thread never sees another's tasks (events, tool answers, GET
//     …/tasks);
//   - a message and an answer sent to a task on another instance reach it;
//     a stop that lands on another instance than the turn's cancels the
//     turn's task there with the user's reason;
//   - a turn refused because the thread's run is open on another instance
//     is a 409 with a clear error, and its retry (once the other turn
//     answered) is served;
//   - the killed instance's tasks are heard as interrupted, once each, and
//     every thread is served after the kill and during the restarts.
//
// Nothing waits on time: the test waits for gates of the scripted model,
// for the servers' log lines, and for the tasks' records (read again after
// a short pause: the reaper's grace is what it waits for after the kill);
// the test binary's deadline and fleetGuard only turn a hang into a failure.
func TestFleet(t *testing.T) {
	t.Parallel()
	dsn := pgtest.StartDSN(t)
	model, modelURL := newModel(t)
	ctx, cancel := context.WithTimeout(t.Context(), fleetGuard)
	defer cancel()
	f := newFleet(t, ctx, model, "-openai-url", modelURL, "-pg", dsn,
		"-pg-heartbeat", "500ms", "-pg-grace", "5s", // a killed instance is declared dead within about 6s
		"-stop-grace", "4s") // turns in flight at a SIGTERM end well within it; a held research is cut
	start := time.Now()

	// Phase 1: three instances. First the cross-instance operations, each
	// sent to a chosen instance, then turns of every thread through the proxy.
	f.messageElsewhere()
	f.answerElsewhere()
	f.stopElsewhere()
	f.conflict()
	f.rounds("p1", 3)
	f.settle("all three up")

	// Phase 2: kill -9 of the instance serving a turn, mid-turn.
	f.killMidTurn()
	f.rounds("p2", 2)
	f.settle("after the kill")
	f.restart(f.killed, false) // back with its id, before the rolling restart

	// Phase 3: a rolling restart of all three while turns go on.
	f.rollingRestart()
	f.settle("after the rolling restart")

	f.mu.Lock()
	defer f.mu.Unlock()
	ends, kinds := 0, map[string]int{}
	for _, seen := range f.seen {
		for id, n := range seen {
			ends += n
			kinds[f.endOf[id].Kind]++
		}
	}
	t.Logf("fleet: %d instances, %d threads, %d turns answered (%d through the proxy, %d of them on another instance than the thread's previous turn), "+
		"%d ends delivered, each once (%d completed, %d cancelled, %d interrupted, %d failed), "+
		"%d turns refused with 409 (the thread's run open on another instance) and retried, %d requests the proxy sent elsewhere after a refused connection, "+
		"%d turn lost to the kill, %d kill -9, %d restarts (1 after the kill, 3 rolling), in %v",
		len(f.procs), fleetThreads, f.turns, f.proxied, f.moved, ends, kinds["completed"], kinds["cancelled"], kinds["interrupted"], kinds["failed"],
		f.retries, f.proxy.dialRetries(), f.lost, f.kills, f.restarts, time.Since(start).Round(time.Millisecond))
}

const (
	fleetThreads = 50
	// fleetGuard bounds the whole test, so that a hang fails it with what
	// it was waiting for.
	fleetGuard = 4 * time.Minute
	// instanceHeader is set by the test's proxy on each response: the
	// instance that served the request.
	instanceHeader = "X-Test-Instance"
)

// fleet is the test's view of the fleet: the servers, the proxy in front
// of them, and what each thread's turns were handed.
type fleet struct {
	t     *testing.T
	ctx   context.Context // ends at fleetGuard
	model *script
	args  []string // every server's, but -instance
	proxy *rrProxy
	// client sends requests to the proxy.
	client *http.Client

	procs  [3]*proc // procs[i] is instance inst_<i+1>
	killed int      // the index of the killed instance

	mu      sync.Mutex                   // guards the fields below
	seen    map[string]map[string]int    // thread: task id: its ends handed to the model
	endOf   map[string]event             // task id: its end as the model read it
	ownerOf map[string]string            // task id: the thread whose response or list showed it
	want    map[string]string            // task id: the end it must have
	checks  map[string]func(event) error // task id: a check of its end
	turns   int                          // turns answered
	proxied int                          // turns answered through the proxy
	moved   int                          // of those, served by another instance than the thread's previous one
	last    map[string]string            // thread: the instance that served its last turn through the proxy
	retries int                          // turns refused with 409 and retried
	lost    int                          // turns whose instance was killed under them
	kills   int
	// restarts counts the servers started again with their instance id.
	restarts int
}

func newFleet(t *testing.T, ctx context.Context, model *script, args ...string) *fleet {
	f := &fleet{t: t, ctx: ctx, model: model, args: args,
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: fleetThreads * 2}},
		seen:   map[string]map[string]int{}, endOf: map[string]event{}, ownerOf: map[string]string{}, want: map[string]string{}, last: map[string]string{},
		checks: map[string]func(event) error{}}
	t.Cleanup(f.client.CloseIdleConnections)
	urls := make([]string, len(f.procs))
	for i := range f.procs {
		f.procs[i] = startServer(t, f.instanceArgs(i)...)
		urls[i] = f.procs[i].url
	}
	f.proxy = newProxy(t, urls)
	return f
}

func instanceName(i int) string { return fmt.Sprintf("inst_%d", i+1) }

func (f *fleet) instanceArgs(i int) []string {
	return append(slices.Clone(f.args), "-instance", instanceName(i))
}

func threadName(i int) string { return fmt.Sprintf("th%02d", i) }

// --- the proxy ---

// rrProxy is a round-robin reverse proxy: each request goes to the next
// backend that is up, whatever its thread. A backend is drained before its
// SIGTERM, as a load balancer does: it gets no new request, and the stop
// waits until the requests it was sent have been answered (a request sent
// as its listener closes would be cut, processed or not). A request whose
// connection is refused is sent to the next backend, as a load balancer
// retries a failed connect; any other failure (a backend killed under a
// request) is a 502.
type rrProxy struct {
	srv *httptest.Server
	tr  *http.Transport

	mu       sync.Mutex // guards the fields below
	backends []backend
	inflight []int         // per backend: requests sent and not yet answered
	answered chan struct{} // closed (and replaced) when a request was answered
	next     int
	redials  int
}

type backend struct {
	inst string
	url  *url.URL
	up   bool
}

func newProxy(t *testing.T, urls []string) *rrProxy {
	p := &rrProxy{tr: &http.Transport{DisableKeepAlives: true}, inflight: make([]int, len(urls)), answered: make(chan struct{})}
	for i, u := range urls {
		p.backends = append(p.backends, backend{inst: instanceName(i)})
		p.set(i, u)
	}
	p.srv = httptest.NewServer(p)
	t.Cleanup(func() {
		p.srv.Close()
		p.tr.CloseIdleConnections()
	})
	return p
}

// set brings backend i up at u.
func (p *rrProxy) set(i int, u string) {
	parsed, err := url.Parse(u)
	if err != nil {
		panic(err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.backends[i].url, p.backends[i].up = parsed, true
}

// down takes backend i out of the rotation.
func (p *rrProxy) down(i int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.backends[i].up = false
}

// drain takes backend i out of the rotation and waits until the requests
// it was sent have been answered, or ctx ends.
func (p *rrProxy) drain(ctx context.Context, i int) error {
	p.down(i)
	for {
		p.mu.Lock()
		n, answered := p.inflight[i], p.answered
		p.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-answered:
		case <-ctx.Done():
			return fmt.Errorf("draining %s: %d requests in flight: %w", instanceName(i), n, ctx.Err())
		}
	}
}

// pick returns the next backend that is up, and counts a request in
// flight to it until done.
func (p *rrProxy) pick() (b backend, i int, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for range p.backends {
		i = p.next % len(p.backends)
		p.next++
		if p.backends[i].up {
			p.inflight[i]++
			return p.backends[i], i, true
		}
	}
	return backend{}, 0, false
}

// done ends a request to backend i that pick counted.
func (p *rrProxy) done(i int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.inflight[i]--
	close(p.answered)
	p.answered = make(chan struct{})
}

func (p *rrProxy) dialRetries() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.redials
}

func (p *rrProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	for attempt := 0; ; attempt++ {
		b, i, ok := p.pick()
		if ok && attempt == 2*len(p.backends) {
			p.done(i)
			ok = false
		}
		if !ok {
			http.Error(w, "proxy: no backend", http.StatusServiceUnavailable)
			return
		}
		var failed error
		rp := &httputil.ReverseProxy{
			Rewrite:   func(pr *httputil.ProxyRequest) { pr.SetURL(b.url) },
			Transport: p.tr,
			ModifyResponse: func(resp *http.Response) error {
				resp.Header.Set(instanceHeader, b.inst)
				return nil
			},
			ErrorHandler: func(_ http.ResponseWriter, _ *http.Request, err error) { failed = err },
		}
		out := r.Clone(r.Context())
		out.Body, out.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		rp.ServeHTTP(w, out)
		p.done(i)
		if failed == nil {
			return
		}
		if op, ok := errors.AsType[*net.OpError](failed); ok && op.Op == "dial" && r.Context().Err() == nil {
			p.mu.Lock()
			p.redials++
			p.mu.Unlock()
			continue // nothing was sent: another backend serves it
		}
		w.Header().Set(instanceHeader, b.inst)
		http.Error(w, "proxy: "+failed.Error(), http.StatusBadGateway)
		return
	}
}

// --- requests ---

// do sends a request to base (the proxy or a server) and returns the
// status, the body and the instance that answered (through the proxy).
func (f *fleet) do(base, method, path, body string) (int, []byte, string, error) {
	req, err := http.NewRequestWithContext(f.ctx, method, base+path, strings.NewReader(body))
	if err != nil {
		return 0, nil, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := f.client.Do(req)
	if err != nil {
		return 0, nil, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, resp.Header.Get(instanceHeader), err
}

// turn runs one turn of thread at base. A 409 (a turn of the thread runs
// on another instance) is retried once sibling, the thread's other turn in
// flight, has answered; with no sibling a 409 is an error. Every other
// status but 200 is returned as an error with the status.
func (f *fleet) turn(base, thread, text string, sibling <-chan struct{}) (turnResult, error) {
	body, _ := json.Marshal(map[string]string{"text": text})
	for {
		code, b, inst, err := f.do(base, http.MethodPost, "/threads/"+thread+"/messages", string(body))
		switch {
		case err != nil:
			return turnResult{}, err
		case code == http.StatusConflict && sibling != nil:
			if want := `{"error":"` + errTurnElsewhere.Error() + `"}` + "\n"; string(b) != want {
				return turnResult{}, fmt.Errorf("POST %s %q: 409 %s, want %s", thread, text, b, want)
			}
			f.mu.Lock()
			f.retries++
			f.mu.Unlock()
			select {
			case <-sibling:
			case <-f.ctx.Done():
				return turnResult{}, fmt.Errorf("POST %s %q: its sibling turn never answered", thread, text)
			}
			sibling = nil // one retry: the other turn has released the run
			continue
		case code != http.StatusOK:
			return turnResult{}, &statusError{code: code, msg: fmt.Sprintf("POST %s %q at %s: %d %s", thread, text, inst, code, b)}
		}
		var res turnResult
		if err := json.Unmarshal(b, &res); err != nil {
			return turnResult{}, fmt.Errorf("POST %s %q: %v: %s", thread, text, err, b)
		}
		if res.Status != "answered" {
			return res, fmt.Errorf("POST %s %q at %s: status %q, want answered: %s", thread, text, inst, res.Status, b)
		}
		f.record(thread, res, inst)
		return res, nil
	}
}

type statusError struct {
	code int
	msg  string
}

func (e *statusError) Error() string { return e.msg }

// mustTurn is turn that fails the test on an error.
func (f *fleet) mustTurn(base, thread, text string) turnResult {
	f.t.Helper()
	res, err := f.turn(base, thread, text, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	return res
}

var taskIDs = regexp.MustCompile(`task_[0-9a-f]{32}`)

// record notes what a turn of thread was handed: each end, once more; each
// task id it shows, which must be the thread's. inst is the instance that
// served it through the proxy ("" for a turn sent to a server directly).
func (f *fleet) record(thread string, res turnResult, inst string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.turns++
	if inst != "" {
		if last := f.last[thread]; last != "" && last != inst {
			f.moved++
		}
		f.last[thread] = inst
		f.proxied++
	}
	seen := f.seen[thread]
	if seen == nil {
		seen = map[string]int{}
		f.seen[thread] = seen
	}
	for _, raw := range res.Events {
		var ev event
		if err := json.Unmarshal(raw, &ev); err != nil {
			f.t.Errorf("thread %s: event %s: %v", thread, raw, err)
			continue
		}
		f.ownLocked(thread, ev.TaskID, "an event")
		if isEnd(ev.Kind) {
			seen[ev.TaskID]++
			f.endOf[ev.TaskID] = ev
		}
	}
	for _, c := range res.Calls {
		for _, id := range taskIDs.FindAllString(c.Answer, -1) {
			f.ownLocked(thread, id, "a "+c.Name+" answer")
		}
	}
}

// ownLocked records that thread was shown task id, and fails the test if
// another thread was shown it.
func (f *fleet) ownLocked(thread, id, where string) {
	if id == "" {
		return
	}
	if owner, ok := f.ownerOf[id]; ok && owner != thread {
		f.t.Errorf("thread %s was shown %s of thread %s in %s", thread, id, owner, where)
		return
	}
	f.ownerOf[id] = thread
}

// tasks lists thread's tasks through the proxy, and checks they are all
// its own; it fails the test on an error.
func (f *fleet) tasks(thread string) threadTasks {
	f.t.Helper()
	tt, err := f.list(thread)
	if err != nil {
		f.t.Fatal(err)
	}
	return tt
}

// list is tasks for any goroutine.
func (f *fleet) list(thread string) (threadTasks, error) {
	code, b, _, err := f.do(f.proxy.srv.URL, http.MethodGet, "/threads/"+thread+"/tasks", "")
	if err != nil || code != http.StatusOK {
		return threadTasks{}, fmt.Errorf("GET %s tasks: %d %s %v", thread, code, b, err)
	}
	var out threadTasks
	if err := json.Unmarshal(b, &out); err != nil {
		return threadTasks{}, err
	}
	f.mu.Lock()
	for _, task := range out.Tasks {
		f.ownLocked(thread, task.ID, "GET …/tasks")
	}
	f.mu.Unlock()
	return out, nil
}

// task returns the task id of thread's list, or fails the test.
func (f *fleet) task(thread, id string) taskView {
	f.t.Helper()
	for _, task := range f.tasks(thread).Tasks {
		if task.ID == id {
			return task
		}
	}
	f.t.Fatalf("thread %s has no task %s", thread, id)
	return taskView{}
}

// expect records the end task id must be heard with.
func (f *fleet) expect(id, kind string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.want[id] = kind
}

// waitTransition waits for instance i's log line of task id becoming to.
func (f *fleet) waitTransition(i int, id, to string) {
	f.t.Helper()
	f.procs[i].waitLine(f.t, fmt.Sprintf("%s's %s on %s", id, to, instanceName(i)), func(l logLine) bool {
		return l.str("msg") == "task" && l.str("task_id") == id && l.str("to") == to
	})
}

// --- the scenarios ---

// messageElsewhere: a research runs on inst_1; a message sent to it on
// inst_2 reaches it (it is in its notes), and the same message to it
// under another thread is refused as not found.
func (f *fleet) messageElsewhere() {
	t := f.t
	const thread = "th00"
	gate := f.model.holdResearch("th00-notes")
	id := startedTask(t, f.mustTurn(f.procs[0].url, thread, "research th00-notes in 1 step"), "th00-notes")
	<-gate.reached
	if got := f.task(thread, id).Instance; got != "inst_1" {
		t.Fatalf("the research runs on %q, want inst_1", got)
	}
	code, b, _, err := f.do(f.procs[1].url, http.MethodPost, "/threads/"+thread+"/tasks/"+id+"/messages", `{"text":"a note from inst_2"}`)
	if err != nil || code != http.StatusOK || !strings.Contains(string(b), `"message_id":"`) {
		t.Fatalf("a message on inst_2 to the research on inst_1: %d %s %v", code, b, err)
	}
	code, b, _, err = f.do(f.procs[2].url, http.MethodPost, "/threads/th01/tasks/"+id+"/messages", `{"text":"not yours"}`)
	if err != nil || code != http.StatusNotFound || string(b) != `{"error":"no such task in this thread"}`+"\n" {
		t.Fatalf("a message to th00's task as th01: %d %s %v; want 404", code, b, err)
	}
	close(gate.release)
	f.expect(id, "completed")
	f.checkEnd(id, func(ev event) error {
		var res struct{ Notes []string }
		if err := json.Unmarshal(ev.Result, &res); err != nil || !slices.Equal(res.Notes, []string{"a note from inst_2"}) {
			return fmt.Errorf("notes %q (%v), want the message sent on inst_2", res.Notes, err)
		}
		return nil
	})
}

// answerElsewhere: a research on inst_1 asks a question; inst_2 shows it,
// inst_3 takes the answer, and the research's result has it; a second
// answer to the same question is refused.
func (f *fleet) answerElsewhere() {
	t := f.t
	const thread = "th01"
	id := startedTask(t, f.mustTurn(f.procs[0].url, thread, "research th01-question in 1 step asking which fanout?"), "th01-question")
	f.waitTransition(0, id, "awaiting_input")
	code, b, _, err := f.do(f.procs[1].url, http.MethodGet, "/threads/"+thread+"/tasks", "")
	var tt threadTasks
	if err == nil {
		err = json.Unmarshal(b, &tt)
	}
	if err != nil || code != http.StatusOK || len(tt.Tasks) != 1 || tt.Tasks[0].ID != id || tt.Tasks[0].Status != "awaiting_input" ||
		tt.Tasks[0].Input == nil || tt.Tasks[0].Input.Prompt != "which fanout?" || tt.Tasks[0].Instance != "inst_1" {
		t.Fatalf("th01's tasks on inst_2: %d %s %v; want the research awaiting input on inst_1, its question", code, b, err)
	}
	answer := `{"text":"64","in_reply_to":"` + tt.Tasks[0].Input.ID + `"}`
	code, b, _, err = f.do(f.procs[2].url, http.MethodPost, "/threads/"+thread+"/tasks/"+id+"/messages", answer)
	if err != nil || code != http.StatusOK {
		t.Fatalf("the answer on inst_3: %d %s %v", code, b, err)
	}
	f.waitTransition(0, id, "completed")
	code, b, _, err = f.do(f.procs[1].url, http.MethodPost, "/threads/"+thread+"/tasks/"+id+"/messages", answer)
	if err != nil || code != http.StatusConflict {
		t.Fatalf("a second answer, to the ended research: %d %s %v; want 409", code, b, err)
	}
	f.expect(id, "completed")
	f.checkEnd(id, func(ev event) error {
		var res struct{ Answer string }
		if err := json.Unmarshal(ev.Result, &res); err != nil || res.Answer != "64" {
			return fmt.Errorf("answer %q (%v), want the one given on inst_3", res.Answer, err)
		}
		return nil
	})
}

// stopElsewhere: a turn on inst_1 started a research and waits for the
// model; the user's stop lands on inst_2, which cancels the research on
// inst_1 with the user's reason and stops the turn there: it ends
// "stopped" without waiting for the model. The cancellation, with the
// reason, is heard at a later turn.
func (f *fleet) stopElsewhere() {
	t := f.t
	const thread, command = "th02", "research th02-stopped in 1 step"
	research := f.model.holdResearch("th02-stopped")
	pause := f.model.pauseTurn(command)
	answered := make(chan turnResult, 1)
	go func() {
		res, _ := f.turn(f.procs[0].url, thread, command, nil)
		answered <- res
	}()
	<-pause.reached
	<-research.reached
	tt := f.tasks(thread)
	if len(tt.Tasks) != 1 {
		t.Fatalf("th02's tasks: %+v; want the research", tt)
	}
	id := tt.Tasks[0].ID
	code, b, _, err := f.do(f.procs[1].url, http.MethodPost, "/threads/"+thread+"/stop?reason=deploy+freeze", "")
	if want := `{"cancelled":1,"instance":"inst_1","stopped":true,"thread":"th02"}` + "\n"; err != nil || code != http.StatusOK || string(b) != want {
		t.Fatalf("the stop on inst_2: %d %s %v; want %s", code, b, err, want)
	}
	f.waitTransition(0, id, "cancelled")
	res := <-answered
	if res.Status != "stopped" { // the model call is still held: the stop ended it
		t.Fatalf("the turn on inst_1 after the stop on inst_2: %+v; want stopped", res)
	}
	f.record(thread, res, "")
	close(pause.release)
	if got := f.task(thread, id); got.Status != "cancelled" || got.CancelReason != "deploy freeze" {
		t.Fatalf("the stopped research: %+v; want cancelled with the user's reason", got)
	}
	f.expect(id, "cancelled")
	f.checkEnd(id, func(ev event) error {
		if ev.Reason != "deploy freeze" {
			return fmt.Errorf("reason %q, want the user's", ev.Reason)
		}
		return nil
	})
}

// conflict: while a turn of th03 runs on inst_1, a turn of th03 on inst_2
// is refused with 409; once the first answered, it is served.
func (f *fleet) conflict() {
	t := f.t
	const thread, command = "th03", "get task_held0000"
	pause := f.model.pauseTurn(command)
	answered := make(chan struct{})
	go func() {
		defer close(answered)
		if _, err := f.turn(f.procs[0].url, thread, command, nil); err != nil {
			t.Error(err)
		}
	}()
	<-pause.reached
	code, b, _, err := f.do(f.procs[1].url, http.MethodPost, "/threads/"+thread+"/messages", `{"text":"hello"}`)
	if want := `{"error":"` + errTurnElsewhere.Error() + `"}` + "\n"; err != nil || code != http.StatusConflict || string(b) != want {
		t.Fatalf("a turn on inst_2 while one runs on inst_1: %d %s %v; want 409 %s", code, b, err, want)
	}
	f.mu.Lock()
	f.retries++
	f.mu.Unlock()
	close(pause.release)
	<-answered
	f.mustTurn(f.procs[1].url, thread, "hello")
}

// checkEnd adds a check of the end of task id, made once it was heard.
func (f *fleet) checkEnd(id string, check func(event) error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.checks[id] = check
}

// rounds runs n turns of every thread through the proxy, all threads at
// once: a research (which ends between turns, on whichever instance ran
// the turn), a list, a bare message. Every fifth thread sends a second
// turn at the same time as its first, which is refused while the other
// runs on another instance, and retried.
func (f *fleet) rounds(phase string, n int) {
	var wg sync.WaitGroup
	for i := range fleetThreads {
		wg.Go(func() {
			for r := range n {
				if err := f.round(phase, i, r); err != nil {
					f.t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if f.t.Failed() {
		f.t.FailNow()
	}
}

// round is turn r of thread i.
func (f *fleet) round(phase string, i, r int) error {
	thread := threadName(i)
	var text string
	switch r % 3 {
	case 0:
		text = fmt.Sprintf("research %s-%s-%d in 1 step", thread, phase, r)
	case 1:
		text = "list"
	default:
		text = "what came back?"
	}
	if i%5 != 4 {
		_, err := f.turn(f.proxy.srv.URL, thread, text, nil)
		return err
	}
	first, second := make(chan struct{}), make(chan struct{})
	errs := make(chan error, 2)
	go func() {
		defer close(first)
		_, err := f.turn(f.proxy.srv.URL, thread, text, second)
		errs <- err
	}()
	go func() {
		defer close(second)
		_, err := f.turn(f.proxy.srv.URL, thread, "and?", first)
		errs <- err
	}()
	return errors.Join(<-errs, <-errs)
}

// settle waits until every task of every thread has ended, taking turns
// of each thread until it has been handed every end, then checks that each
// end was handed to its thread once, marked heard, and as expected.
func (f *fleet) settle(phase string) {
	t := f.t
	var wg sync.WaitGroup
	for i := range fleetThreads {
		wg.Go(func() {
			if err := f.settleThread(threadName(i)); err != nil {
				t.Errorf("%s: %v", phase, err)
			}
		})
	}
	wg.Wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	for thread, seen := range f.seen {
		for id, n := range seen {
			if n != 1 {
				t.Errorf("%s: the end of %s (%s) was handed to %s's model %d times, want once", phase, id, f.endOf[id].Kind, thread, n)
			}
		}
	}
	for id, kind := range f.want {
		if ev, ok := f.endOf[id]; !ok || ev.Kind != kind {
			t.Errorf("%s: %s ended %q, want %q", phase, id, ev.Kind, kind)
		}
		if check := f.checks[id]; check != nil {
			if err := check(f.endOf[id]); err != nil {
				t.Errorf("%s: the end of %s: %v", phase, id, err)
			}
		}
	}
	if t.Failed() {
		t.FailNow()
	}
}

// settleThread waits until thread's tasks have all ended and its turns
// were handed each end, taking turns for that.
func (f *fleet) settleThread(thread string) error {
	for turns := 0; ; {
		tt, err := f.list(thread)
		if err != nil {
			return err
		}
		live, unheard := 0, []string{}
		f.mu.Lock()
		for _, task := range tt.Tasks {
			switch {
			case !isEnd(string(task.Status)):
				live++
			case f.seen[thread][task.ID] == 0:
				unheard = append(unheard, task.ID+" "+string(task.Status))
			case !task.Announced:
				f.t.Errorf("thread %s: %s's end was handed to the model but is not marked heard", thread, task.ID)
			}
		}
		f.mu.Unlock()
		switch {
		case live == 0 && len(unheard) == 0:
			return nil
		case f.ctx.Err() != nil:
			return fmt.Errorf("thread %s not settled after %d turns: %d tasks live, ends never handed to the model: %q", thread, turns, live, unheard)
		case live > 0: // a research ending, or the reaper's grace running: look again soon
			select {
			case <-time.After(100 * time.Millisecond):
			case <-f.ctx.Done():
			}
			continue
		}
		turns++
		if _, err := f.turn(f.proxy.srv.URL, thread, "anything new?", nil); err != nil {
			return err
		}
	}
}

// killMidTurn holds a research on each of six threads (on the instances in
// turn), then a turn of th10 that waits for the model after starting its
// research, through the proxy, and kills the instance serving it: that
// turn is lost (502), the proxy routes to the remaining two, and the
// killed instance's tasks are heard as interrupted, the others completed.
func (f *fleet) killMidTurn() {
	t := f.t
	type held struct {
		thread, id string
		gate       *gate
	}
	var holds []held
	for i := 20; i < 26; i++ {
		thread := threadName(i)
		topic := thread + "-held"
		g := f.model.holdResearch(topic)
		id := startedTask(t, f.mustTurn(f.proxy.srv.URL, thread, "research "+topic+" in 1 step"), topic)
		<-g.reached
		holds = append(holds, held{thread, id, g})
	}
	const victim, command = "th10", "research th10-victim in 1 step"
	research := f.model.holdResearch("th10-victim")
	pause := f.model.pauseTurn(command)
	lost := make(chan error, 1)
	go func() {
		_, err := f.turn(f.proxy.srv.URL, victim, command, nil)
		lost <- err
	}()
	<-pause.reached
	<-research.reached
	var victimTask taskView
	for _, task := range f.tasks(victim).Tasks {
		if task.Name == "research-th10-victim" {
			victimTask = task
		}
	}
	f.killed = -1
	for i := range f.procs {
		if instanceName(i) == victimTask.Instance {
			f.killed = i
		}
	}
	if f.killed < 0 {
		t.Fatalf("th10's turn: its research %+v runs on no instance of the fleet", victimTask)
	}
	f.proxy.down(f.killed)
	f.procs[f.killed].kill(t)
	f.kills++
	if se, ok := errors.AsType[*statusError](<-lost); !ok || se.code != http.StatusBadGateway {
		t.Fatalf("the turn of th10 on the killed instance: %v; want a 502 from the proxy", se)
	}
	f.lost++
	f.expect(victimTask.ID, "interrupted")
	for _, h := range holds {
		if f.task(h.thread, h.id).Instance == instanceName(f.killed) {
			f.expect(h.id, "interrupted")
		} else {
			f.expect(h.id, "completed")
		}
		close(h.gate.release)
	}
}

// restart starts instance i again with its id and brings it back into the
// proxy's rotation; with stop, it is first drained (no request in flight
// to it) and stopped (SIGTERM).
func (f *fleet) restart(i int, stop bool) {
	if stop {
		if err := f.proxy.drain(f.ctx, i); err != nil {
			f.t.Fatal(err)
		}
		f.procs[i].stop(f.t)
	}
	f.procs[i] = startServer(f.t, f.instanceArgs(i)...)
	f.proxy.set(i, f.procs[i].url)
	f.restarts++
}

// rollingRestart restarts the three instances one at a time while every
// thread takes turns through the proxy, until each thread had a turn
// answered after the last restart. A research held on inst_1 when it is
// stopped is cut at -stop-grace: heard once as interrupted.
func (f *fleet) rollingRestart() {
	const shutText = "shut down before it ended"
	gate := f.model.holdResearch("th30-deploy")
	id := startedTask(f.t, f.mustTurn(f.procs[0].url, "th30", "research th30-deploy in 1 step"), "th30-deploy")
	<-gate.reached
	f.expect(id, "interrupted")
	f.checkEnd(id, func(ev event) error {
		if !strings.Contains(ev.Error, shutText) {
			return fmt.Errorf("error %q, want the shutdown's %q", ev.Error, shutText)
		}
		return nil
	})
	done := make(chan struct{})
	var wg sync.WaitGroup
	for i := range fleetThreads {
		wg.Go(func() {
			for r := 0; ; r++ {
				select {
				case <-done:
					if err := f.round("p3", i, r); err != nil { // one more, after the last restart
						f.t.Error(err)
					}
					return
				default:
				}
				if err := f.round("p3", i, r); err != nil {
					f.t.Error(err)
					return
				}
			}
		})
	}
	for i := range f.procs {
		f.restart(i, true)
	}
	close(done)
	wg.Wait()
	if f.t.Failed() {
		f.t.FailNow()
	}
}

// A lookup answered in the foreground on A, then the model call after it
// fails: the server on PostgreSQL drops the turn (its conversation is not
// the fleet's) and gives its events back. The lookup's end, which the
// model was handed only as the tool's answer, is heard by the thread's
// next turn on B, once (decision 804). Before, it was marked heard when
// the lookup returned, and no turn ever told the model.
func TestForegroundAnswerOfAFailedTurnHeardOnAnotherInstance(t *testing.T) {
	t.Parallel()
	dsn := pgtest.StartDSN(t)
	model, url := newModel(t)
	a := startServer(t, "-openai-url", url, "-pg", dsn, "-instance", "inst_a", "-foreground", "1h")
	b := startServer(t, "-openai-url", url, "-pg", dsn, "-instance", "inst_b", "-foreground", "1h")
	model.failTurn("lookup the answer")
	a.expectError("model")
	if _, err := a.post(t.Context(), "fa", "lookup the answer"); err == nil || !strings.Contains(err.Error(), "502") {
		t.Fatalf("the turn on A: %v; want a 502, the model call after the lookup failed", err)
	}
	tt := b.tasks(t, "fa")
	if len(tt.Tasks) != 1 || tt.Tasks[0].Status != "completed" {
		t.Fatalf("the thread's tasks seen on B: %+v; want the lookup, completed", tt)
	}
	id := tt.Tasks[0].ID
	if got, want := ends(t, b.mustPost(t, "fa", "hello")), []string{"completed " + id}; !slices.Equal(got, want) {
		t.Errorf("the next turn, on B: ends %q, want %q", got, want)
	}
	if got := ends(t, b.mustPost(t, "fa", "again")); len(got) != 0 {
		t.Errorf("the turn after: ends %q, want none", got)
	}
}
