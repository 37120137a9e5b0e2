package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// sqliteServer starts a server on a new SQLite file in a temporary
// directory, calling the test's scripted model at modelURL.
func sqliteServer(t *testing.T, modelURL string, args ...string) (*proc, string) {
	t.Helper()
	db := filepath.Join(t.TempDir(), "tasks.db")
	return startServer(t, append([]string{"-db", db, "-openai-url", modelURL}, args...)...), db
}

// Two threads run turns at the same time; each one's research ends between
// its turns, wakes that thread only, and is delivered once, at that
// thread's next turn; neither thread sees the other's tasks.
func TestTwoThreadsAtOnce(t *testing.T) {
	t.Parallel()
	model, url := newModel(t)
	srv, _ := sqliteServer(t, url)
	alpha, beta := model.holdResearch("alpha"), model.holdResearch("beta")

	var wg sync.WaitGroup
	results := map[string]turnResult{}
	var mu sync.Mutex
	for thread, topic := range map[string]string{"a": "alpha", "b": "beta"} {
		wg.Go(func() {
			res, err := srv.post(t.Context(), thread, "research "+topic+" in 2 steps")
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			results[thread] = res
			mu.Unlock()
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for thread, res := range results {
		if res.Status != "answered" || !strings.HasPrefix(res.Reply, "done: [research] ") || len(res.Events) != 0 || !res.Pending {
			t.Errorf("thread %s, first turn: %+v; want answered, the research started, no events, pending", thread, res)
		}
	}
	idA, idB := startedTask(t, results["a"], "alpha"), startedTask(t, results["b"], "beta")

	close(alpha.release)
	srv.waitWake(t, "a", idA, "completed")
	if tt := srv.tasks(t, "a"); !tt.Live || tt.News != 1 || tt.Running || !maps1(statuses(tt), idA, "completed") {
		t.Errorf("thread a's tasks: %+v; want live, news 1, only %s completed", tt, idA)
	}
	if tt := srv.tasks(t, "b"); tt.News != 0 || !maps1(statuses(tt), idB, "running") {
		t.Errorf("thread b's tasks: %+v; want no news, only %s running", tt, idB)
	}

	res := srv.mustPost(t, "a", "what came back?")
	// The progress of both steps, coalesced into the latest, then the end.
	if got, want := ends(t, res), []string{"completed " + idA}; !slices.Equal(got, want) || res.Reply != "ok: 2 background events" ||
		len(res.Events) != 2 || !strings.Contains(string(res.Events[0]), `"event_type":"progress","payload":{"done":2,"total":2,"message":"step 2 of 2"`) {
		t.Errorf("thread a, second turn: ends %q, reply %q, events %s; want %q, \"ok: 2 background events\", the last progress first", got, res.Reply, res.Events, want)
	}
	var findings struct{ Findings []string }
	for _, raw := range res.Events {
		var ev event
		_ = json.Unmarshal(raw, &ev)
		if ev.Kind == "completed" {
			_ = json.Unmarshal(ev.Result, &findings)
		}
	}
	if want := []string{"finding 1 of 2 about alpha", "finding 2 of 2 about alpha"}; !slices.Equal(findings.Findings, want) {
		t.Errorf("alpha's findings %q, want %q", findings.Findings, want)
	}

	// Owner scoping: thread b cannot see alpha, whose id it was given.
	res = srv.mustPost(t, "b", "get "+idA)
	if len(res.Calls) != 1 || !strings.Contains(res.Calls[0].Answer, "not found") || len(ends(t, res)) != 0 {
		t.Errorf("thread b getting a's task: %+v; want not found and no ends", res)
	}

	close(beta.release)
	srv.waitWake(t, "b", idB, "completed")
	if got, want := ends(t, srv.mustPost(t, "b", "and now?")), []string{"completed " + idB}; !slices.Equal(got, want) {
		t.Errorf("thread b, third turn: ends %q, want %q", got, want)
	}
	for _, thread := range []string{"a", "b"} {
		if got := ends(t, srv.mustPost(t, thread, "anything else?")); len(got) != 0 {
			t.Errorf("thread %s, last turn: ends %q, want none (each end once)", thread, got)
		}
	}
}

// maps1 reports whether m is exactly {id: status}.
func maps1(m map[string]string, id, status string) bool { return len(m) == 1 && m[id] == status }

// A client that hangs up mid-turn ends the turn but not the research it
// started: the research completes, and its end is delivered once, at the
// thread's next turn.
func TestHangUpMidTurn(t *testing.T) {
	t.Parallel()
	model, url := newModel(t)
	srv, _ := sqliteServer(t, url)
	research := model.holdResearch("hang")
	held := model.holdTurn("research hang")

	ctx, hangUp := context.WithCancel(t.Context())
	posted := make(chan error, 1)
	go func() {
		_, err := srv.post(ctx, "h", "research hang")
		posted <- err
	}()
	<-held.reached     // the research is started, and the model is being asked again
	<-research.reached // the research asks the model its first step
	hangUp()
	if err := <-posted; err == nil {
		t.Fatal("the hung-up request succeeded")
	}
	end := srv.waitLine(t, "the end of the hung-up turn", func(l logLine) bool { return l.str("msg") == "turn end" && l.str("thread") == "h" })
	if end.str("status") != "" || !strings.Contains(end.str("cause"), "canceled") {
		t.Errorf("the hung-up turn ended %v; want no status and the request's cancel as cause", end)
	}
	tt := srv.tasks(t, "h")
	if len(tt.Tasks) != 1 || tt.Tasks[0].Status != "running" || tt.Running {
		t.Fatalf("after the hang-up: %+v; want one task running, no turn", tt)
	}
	id := tt.Tasks[0].ID

	close(research.release)
	srv.waitWake(t, "h", id, "completed")
	if got, want := ends(t, srv.mustPost(t, "h", "back again")), []string{"completed " + id}; !slices.Equal(got, want) {
		t.Errorf("the turn after the hang-up: ends %q, want %q", got, want)
	}
	if got := ends(t, srv.mustPost(t, "h", "and again")); len(got) != 0 {
		t.Errorf("the next turn: ends %q, want none", got)
	}
	if st := statuses(srv.tasks(t, "h")); st[id] != "completed" {
		t.Errorf("the research ended %s, want completed", st[id])
	}
}

// A client that hangs up while a tool runs in the foreground does not
// abandon the call: it finishes in the foreground (it is not announced, and
// not cancelled), and the turn ends at its next model call.
func TestHangUpDuringForeground(t *testing.T) {
	t.Parallel()
	model, url := newModel(t)
	srv, _ := sqliteServer(t, url, "-foreground", "1h") // never promoted here: the test decides when it ends
	lookup := model.holdLookup("slow thing")

	ctx, hangUp := context.WithCancel(t.Context())
	posted := make(chan error, 1)
	go func() {
		_, err := srv.post(ctx, "f", "lookup slow thing")
		posted <- err
	}()
	<-lookup.reached
	hangUp()
	if err := <-posted; err == nil {
		t.Fatal("the hung-up request succeeded")
	}
	srv.waitLine(t, "the server noticing the hang-up", func(l logLine) bool { return l.str("msg") == "client gone" && l.str("thread") == "f" })
	close(lookup.release)
	end := srv.waitLine(t, "the end of the hung-up turn", func(l logLine) bool { return l.str("msg") == "turn end" && l.str("thread") == "f" })
	if !strings.Contains(end.str("cause"), "canceled") || end["steps"] != float64(2) {
		t.Errorf("the hung-up turn ended %v; want the request's cancel as cause, after two model calls", end)
	}
	tt := srv.tasks(t, "f")
	if len(tt.Tasks) != 1 || tt.Tasks[0].Status != "completed" || string(tt.Tasks[0].Result) != `"the answer to slow thing"` || tt.News != 0 {
		t.Fatalf("after the hang-up: %+v; want the lookup completed with its answer, no news", tt)
	}
	if res := srv.mustPost(t, "f", "hello"); len(ends(t, res)) != 0 {
		t.Errorf("the next turn: ends %q, want none (the lookup answered in the foreground)", ends(t, res))
	}
}

// POST /threads/{id}/stop stops the running turn and cancels the tasks it
// started; the stopped turn answers "stopped" and the cancel is delivered
// once at the next turn.
func TestUserStop(t *testing.T) {
	t.Parallel()
	model, url := newModel(t)
	srv, _ := sqliteServer(t, url)
	research := model.holdResearch("endless")
	held := model.holdTurn("research endless")

	posted := make(chan turnResult, 1)
	go func() {
		res, err := srv.post(t.Context(), "s", "research endless")
		if err != nil {
			t.Error(err)
		}
		posted <- res
	}()
	<-held.reached
	<-research.reached
	code, body, err := srv.do(t.Context(), http.MethodPost, "/threads/s/stop?reason=wrong+topic", "")
	if err != nil || code != http.StatusOK || !strings.Contains(string(body), `"stopped":true`) {
		t.Fatalf("stop: %d %s %v", code, body, err)
	}
	res := <-posted
	if res.Status != "stopped" || len(res.Calls) != 1 {
		t.Fatalf("the stopped turn: %+v; want status stopped after one call", res)
	}
	id := startedTask(t, res, "endless")
	srv.waitWake(t, "s", id, "cancelled")
	tt := srv.tasks(t, "s")
	if len(tt.Tasks) != 1 || tt.Tasks[0].Status != "cancelled" {
		t.Errorf("after the stop: %+v; want the research cancelled", tt)
	}
	next := srv.mustPost(t, "s", "hello")
	if got, want := ends(t, next), []string{"cancelled " + id}; !slices.Equal(got, want) {
		t.Errorf("the turn after the stop: ends %q, want %q", got, want)
	} else if ev := endEvents(t, next)[0]; ev.Reason != "wrong topic" {
		t.Errorf("the model reads the cancel's reason %q, want the user's %q", ev.Reason, "wrong topic")
	}
	code, body, _ = srv.do(t.Context(), http.MethodPost, "/threads/s/stop", "")
	if code != http.StatusOK || !strings.Contains(string(body), `"stopped":false`) {
		t.Errorf("a stop with no turn running: %d %s; want stopped false", code, body)
	}
}

// Requests the server refuses, each with its status and error; none makes
// a thread. A new thread beyond -max-threads is refused while every live
// thread has a request in flight, and evicts the least recently used one
// otherwise.
func TestBadRequests(t *testing.T) {
	t.Parallel()
	model, url := newModel(t)
	srv, _ := sqliteServer(t, url, "-max-text", "16", "-max-body", "64", "-max-threads", "1")
	for _, tc := range []struct {
		name, method, path, body string
		code                     int
		want                     string
	}{
		{"bad thread id", "POST", "/threads/a%20b/messages", `{"text":"hi"}`, 400, "thread id"},
		{"long thread id", "GET", "/threads/" + strings.Repeat("x", 65) + "/tasks", "", 400, "thread id"},
		{"not JSON", "POST", "/threads/t/messages", `hi`, 400, `want {\"text\"`},
		{"unknown field", "POST", "/threads/t/messages", `{"text":"hi","role":"system"}`, 400, `unknown field \"role\"`},
		{"two objects", "POST", "/threads/t/messages", `{"text":"hi"}{"text":"ho"}`, 400, "one JSON object"},
		{"no text", "POST", "/threads/t/messages", `{}`, 400, `\"text\" is missing`},
		{"blank text", "POST", "/threads/t/messages", `{"text":" \n"}`, 400, `\"text\" is blank`},
		{"long text", "POST", "/threads/t/messages", `{"text":"12345678901234567"}`, 400, `\"text\" is 17 bytes, over 16`},
		{"big body", "POST", "/threads/t/messages", `{"text":"` + strings.Repeat(" ", 80) + `x"}`, 400, "body over 64 bytes"},
		{"wrong method", "GET", "/threads/t/messages", "", 405, ""},
		{"message: not JSON", "POST", "/threads/t/tasks/task_x/messages", `hi`, 400, `want one JSON object {\"text\": \"...\", \"in_reply_to\"`},
		{"message: blank text", "POST", "/threads/t/tasks/task_x/messages", `{"text":" "}`, 400, `\"text\" is missing or blank`},
		{"message: long text", "POST", "/threads/t/tasks/task_x/messages", `{"text":"12345678901234567"}`, 400, `\"text\": want valid UTF-8 of at most 16 bytes`},
		{"message: no such task", "POST", "/threads/t/tasks/task_x/messages", `{"text":"hi"}`, 404, "no such task in this thread"},
	} {
		code, body, err := srv.do(t.Context(), tc.method, tc.path, tc.body)
		if err != nil || code != tc.code || !strings.Contains(string(body), tc.want) {
			t.Errorf("%s: %d %s %v; want %d with %q", tc.name, code, body, err, tc.code, tc.want)
		}
	}
	if tt := srv.tasks(t, "t"); tt.Live {
		t.Errorf("a refused request made thread t live")
	}
	// At the cap, a new thread is refused only while every live thread is busy.
	held := model.holdTurn("list")
	posted := make(chan turnResult, 1)
	go func() {
		res, err := srv.post(t.Context(), "first", "list")
		if err != nil {
			t.Error(err)
		}
		posted <- res
	}()
	<-held.reached
	code, body, _ := srv.do(t.Context(), "POST", "/threads/second/messages", `{"text":"hello"}`)
	if code != http.StatusServiceUnavailable || !strings.Contains(string(body), "too many busy threads: at most 1") {
		t.Errorf("a thread beyond -max-threads while the only one is busy: %d %s; want 503", code, body)
	}
	if code, body, err := srv.do(t.Context(), http.MethodPost, "/threads/first/stop", ""); err != nil || code != http.StatusOK {
		t.Fatalf("stop: %d %s %v", code, body, err)
	}
	if res := <-posted; res.Status != "stopped" {
		t.Fatalf("the held turn: %+v; want stopped", res)
	}
	if res := srv.mustPost(t, "second", "hello"); res.Status != "answered" {
		t.Errorf("a thread beyond -max-threads with the only one idle: %+v; want answered", res)
	}
	if first, second := srv.tasks(t, "first"), srv.tasks(t, "second"); first.Live || !second.Live {
		t.Errorf("after the second thread's turn: first live %v, second live %v; want the first evicted", first.Live, second.Live)
	}
}

// 200 threads post a turn at once on one SQLite file: every turn is
// answered, and every research's end is delivered exactly once over the
// thread's turns.
func Test200Threads(t *testing.T) {
	t.Parallel()
	const n = 200
	_, url := newModel(t)
	srv, _ := sqliteServer(t, url)
	thread := func(i int) string { return fmt.Sprintf("t%03d", i) }

	seen := make([]map[string]int, n) // per thread: task id -> ends delivered
	ids := make([]string, n)
	turn := func(i int, text string) {
		res, err := srv.post(t.Context(), thread(i), text)
		if err != nil {
			t.Error(err)
			return
		}
		if res.Status != "answered" {
			t.Errorf("thread %d: %+v", i, res)
		}
		if strings.HasPrefix(text, "research") {
			ids[i] = startedTask(t, res, fmt.Sprintf("topic %d", i))
		}
		for _, e := range ends(t, res) {
			seen[i][e]++
		}
	}
	var wg sync.WaitGroup
	for i := range n {
		seen[i] = map[string]int{}
		wg.Go(func() { turn(i, fmt.Sprintf("research topic %d in 1 step", i)) })
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	// Each end was delivered in the first turn, or arrived after it and woke
	// the thread.
	srv.waitLog(t, "every research's end", func(lines []logLine) bool {
		woken := map[string]bool{}
		for _, l := range lines {
			if l.str("msg") == "wake" && l.str("kind") == "completed" {
				woken[l.str("task_id")] = true
			}
		}
		for i := range n {
			if !woken[ids[i]] && seen[i]["completed "+ids[i]] == 0 {
				return false
			}
		}
		return true
	})
	for round := range 2 {
		for i := range n {
			wg.Go(func() { turn(i, fmt.Sprintf("round %d", round)) })
		}
		wg.Wait()
	}
	for i := range n {
		if want := map[string]int{"completed " + ids[i]: 1}; fmt.Sprint(seen[i]) != fmt.Sprint(want) {
			t.Errorf("thread %d was handed %v; want %v", i, seen[i], want)
		}
	}
}

// The calls of one model reply run in parallel (WithParallel): a quick
// lookup ends while a slow one of the same reply is held, and the answers
// keep the calls' order. A spawn the model can fix (a research name still
// running) is answered with the refusal's text (bgopenai.ModelError), and
// the turn goes on.
func TestToolCallsOfOneReply(t *testing.T) {
	t.Parallel()
	model, url := newModel(t)
	srv, _ := sqliteServer(t, url, "-foreground", "1h") // never promoted here: the test decides when it ends
	slow := model.holdLookup("slow")

	posted := make(chan turnResult, 1)
	go func() {
		res, err := srv.post(t.Context(), "par", "lookup slow; lookup quick")
		if err != nil {
			t.Error(err)
		}
		posted <- res
	}()
	<-slow.reached
	srv.waitLine(t, "the quick lookup's end while the slow one is held", func(l logLine) bool {
		return l.str("msg") == "task" && l.str("thread") == "par" && l.str("to") == "completed"
	})
	close(slow.release)
	res := <-posted
	var got []string
	for _, c := range res.Calls {
		got = append(got, c.Name+" "+c.Arguments+" "+c.Answer)
	}
	want := []string{`lookup {"query":"slow"} "the answer to slow"`, `lookup {"query":"quick"} "the answer to quick"`}
	if res.Status != "answered" || !slices.Equal(got, want) {
		t.Errorf("the parallel lookups: %s, calls %q; want answered, calls %q", res.Status, got, want)
	}

	dup := model.holdResearch("dup")
	res = srv.mustPost(t, "par", "research dup; research dup")
	const refusal = "refused: a research named research-dup is still running: wait for it or cancel it: " +
		"bgtask: a non-terminal task with this name already exists"
	var started, refused int
	for _, c := range res.Calls {
		switch {
		case c.Answer == refusal:
			refused++
		case strings.Contains(c.Answer, `"status":"started"`):
			started++
		}
	}
	if res.Status != "answered" || len(res.Calls) != 2 || started != 1 || refused != 1 {
		t.Errorf("two researches of one name: %+v; want answered, one started and one answered %q", res, refusal)
	}
	close(dup.release)
}

// The user's stop while lookup runs in the foreground: the call is
// promoted to the background and the run's end cancels it with the run's
// other tasks; the cancel is delivered once, at the next turn.
func TestUserStopDuringForeground(t *testing.T) {
	t.Parallel()
	model, url := newModel(t)
	srv, _ := sqliteServer(t, url, "-foreground", "1h")
	lookup := model.holdLookup("held")

	posted := make(chan turnResult, 1)
	go func() {
		res, err := srv.post(t.Context(), "sf", "lookup held")
		if err != nil {
			t.Error(err)
		}
		posted <- res
	}()
	<-lookup.reached
	code, body, err := srv.do(t.Context(), http.MethodPost, "/threads/sf/stop", "")
	if err != nil || code != http.StatusOK || !strings.Contains(string(body), `"stopped":true`) {
		t.Fatalf("stop: %d %s %v", code, body, err)
	}
	res := <-posted
	if res.Status != "stopped" || len(res.Calls) != 1 || res.Calls[0].Answer != "tool call failed: the host could not run it" {
		t.Fatalf("the stopped turn: %+v; want stopped, the lookup answered as failed", res)
	}
	tt := srv.tasks(t, "sf")
	if len(tt.Tasks) != 1 {
		t.Fatalf("after the stop: %+v; want the lookup's task", tt)
	}
	id := tt.Tasks[0].ID
	srv.waitWake(t, "sf", id, "cancelled")
	if got, want := ends(t, srv.mustPost(t, "sf", "hello")), []string{"cancelled " + id}; !slices.Equal(got, want) {
		t.Errorf("the turn after the stop: ends %q, want %q", got, want)
	}
	if got := ends(t, srv.mustPost(t, "sf", "again")); len(got) != 0 {
		t.Errorf("the next turn: ends %q, want none", got)
	}
	if st := statuses(srv.tasks(t, "sf")); !maps1(st, id, "cancelled") {
		t.Errorf("the lookup's task %v, want %s cancelled", st, id)
	}
}
