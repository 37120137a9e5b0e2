package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/bgtask/bgtask/agent"
	"github.com/bgtask/bgtask/bgtype"

	"github.com/openai/openai-go/v3"

	"github.com/bgtask/bgtask"
	bgopenai "github.com/bgtask/bgtask/adapters/openai"
)

// server holds the live threads. Each thread is one bgtask owner, with its
// one Plugin, its tools and its conversation, made at its first message and
// kept while the process runs, up to cfg.maxThreads: beyond them, the least
// recently used thread with no request in flight is evicted (its Plugin
// closed, its conversation dropped) to make room.
type server struct {
	m      *bgtask.Manager
	client openai.Client
	model  string
	cfg    config
	log    *slog.Logger
	runs   heldRuns // the open run of each thread across a fleet; nil without one

	mu      sync.Mutex // guards the fields below and each thread's users and used
	threads map[string]*thread
	closing map[string]chan struct{} // evicted threads whose Plugin is being closed: closed when it is
	clock   uint64                   // the last use stamp given to a thread
}

func newServer(m *bgtask.Manager, client openai.Client, model string, cfg config, log *slog.Logger) *server {
	return &server{m: m, client: client, model: model, cfg: cfg, log: log,
		threads: make(map[string]*thread), closing: make(map[string]chan struct{})}
}

// thread is one conversation. Its turns run one at a time (turn is its
// lock, a channel so that a request waiting for it can give up when its
// client does).
type thread struct {
	id     string
	plugin *agent.Plugin
	tools  *bgopenai.Toolset
	turn   chan struct{} // holds a token while a turn runs

	users int    // requests holding the thread (acquire to release); guarded by server.mu
	used  uint64 // server.clock at its last acquire; guarded by server.mu

	mu      sync.Mutex // guards the fields below
	history []entry    // the conversation, oldest first; written by the turn holder
	stop    context.CancelCauseFunc
	news    int // events that arrived since the last turn began (WithOnWake)
}

// entry is one message of a thread's conversation; role tells where a
// turn begins ("user" with plain text) when the history is cut.
type entry struct {
	role  string
	plain bool // a message the user wrote
	msg   openai.ChatCompletionMessageParamUnion
}

var threadID = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

func (s *server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /threads/{id}/messages", s.postMessage)
	mux.HandleFunc("GET /threads/{id}/tasks", s.getTasks)
	mux.HandleFunc("POST /threads/{id}/stop", s.postStop)
	mux.HandleFunc("POST /threads/{id}/tasks/{task}/messages", s.postTaskMessage)
	return mux
}

// errTooManyThreads refuses a new thread when cfg.maxThreads threads are
// live and every one has a request in flight.
var errTooManyThreads = errors.New("too many busy threads")

// live returns the live thread id, or nil.
func (s *server) live(id string) *thread {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.threads[id]
}

// acquire returns the thread id, made (with its Plugin) if it is not live,
// and holds it until release: a held thread is never evicted. Making a
// thread at the cap evicts the least recently used thread nobody holds;
// if every thread is held it fails with errTooManyThreads. A thread being
// evicted is made anew once its Plugin is closed (the Manager allows one
// live Plugin per owner); acquire waits for that, or for ctx.
func (s *server) acquire(ctx context.Context, id string) (*thread, error) {
	for {
		s.mu.Lock()
		if th := s.threads[id]; th != nil {
			s.clock++
			th.users, th.used = th.users+1, s.clock
			s.mu.Unlock()
			return th, nil
		}
		if closed := s.closing[id]; closed != nil {
			s.mu.Unlock()
			select {
			case <-closed:
				continue
			case <-ctx.Done():
				return nil, context.Cause(ctx)
			}
		}
		var victim *thread
		if len(s.threads) >= s.cfg.maxThreads {
			if victim = s.leastRecentlyUsed(); victim == nil {
				s.mu.Unlock()
				return nil, errTooManyThreads
			}
			delete(s.threads, victim.id)
			s.closing[victim.id] = make(chan struct{})
		}
		th, err := s.newThread(id)
		if err == nil {
			s.clock++
			th.users, th.used = 1, s.clock
			s.threads[id] = th
		}
		s.mu.Unlock()
		if victim != nil {
			s.evict(ctx, victim)
		}
		return th, err
	}
}

// release lets go of a thread acquire returned.
func (s *server) release(th *thread) {
	s.mu.Lock()
	th.users--
	s.mu.Unlock()
}

// leastRecentlyUsed returns the live thread nobody holds that was used
// longest ago, or nil. s.mu is held.
func (s *server) leastRecentlyUsed() *thread {
	var lru *thread
	for _, th := range s.threads {
		if th.users == 0 && (lru == nil || th.used < lru.used) {
			lru = th
		}
	}
	return lru
}

// evict closes the Plugin of th, which acquire took out of the live
// threads: its tasks go on, and what they report goes to the thread's next
// Plugin, made at its next message. Its conversation is dropped.
func (s *server) evict(ctx context.Context, th *thread) {
	if err := closePlugin(context.WithoutCancel(ctx), th.plugin); err != nil {
		s.log.Error("evict", "thread", th.id, "err", err)
	} else {
		s.log.Info("evict", "thread", th.id)
	}
	s.mu.Lock()
	close(s.closing[th.id])
	delete(s.closing, th.id)
	s.mu.Unlock()
}

// newThread makes the thread id, its Plugin and its tools. s.mu is held.
func (s *server) newThread(id string) (*thread, error) {
	th := &thread{id: id, turn: make(chan struct{}, 1)}
	p, err := newPlugin(s.m, id, th.woken(s.log))
	if err != nil {
		return nil, err
	}
	ts, err := bgopenai.New(append(agent.Tools(p.Owner()),
		researchTool(p.Owner(), s.client, s.model), lookupTool(p.Owner(), s.client, s.model, s.cfg.foreground)),
		bgopenai.WithParallel(toolParallel))
	if err != nil {
		_ = closePlugin(context.Background(), p) // nothing to commit: no run was opened
		return nil, err
	}
	th.plugin, th.tools = p, ts
	return th, nil
}

// toolParallel is how many tool calls of one model reply run at once.
const toolParallel = 4

// woken is the thread's WithOnWake callback: an event arrived while no
// turn of the thread was open. The server does not run a turn by itself
// (the user is not there to read it); it counts the news, which GET
// /threads/{id}/tasks shows, logs it, and the next turn delivers the
// events.
func (th *thread) woken(log *slog.Logger) func(bgtype.Event) {
	return func(ev bgtype.Event) {
		th.mu.Lock()
		th.news++
		th.mu.Unlock()
		log.Info("wake", "thread", th.id, "task_id", ev.TaskID, "name", ev.Name, "kind", ev.Kind)
	}
}

// httpError writes {"error": text} with code.
func httpError(w http.ResponseWriter, code int, text string) {
	writeJSON(w, code, map[string]string{"error": text})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// pathThread returns the request's thread id, or writes a 400 and "".
func pathThread(w http.ResponseWriter, r *http.Request) string {
	id := r.PathValue("id")
	if !threadID.MatchString(id) {
		httpError(w, http.StatusBadRequest, "thread id: want 1 to 64 letters, digits, '.', '_' or '-'")
		return ""
	}
	return id
}

// postMessage runs one turn of the thread for the user's message.
func (s *server) postMessage(w http.ResponseWriter, r *http.Request) {
	id := pathThread(w, r)
	if id == "" {
		return
	}
	text, err := s.readText(w, r)
	if err != nil {
		httpError(w, http.StatusBadRequest, err.Error())
		return
	}
	th, err := s.acquire(r.Context(), id)
	switch {
	case errors.Is(err, errTooManyThreads):
		httpError(w, http.StatusServiceUnavailable, fmt.Sprintf("%v: at most %d", err, s.cfg.maxThreads))
		return
	case err != nil && r.Context().Err() != nil:
		return // the client left while the thread was being evicted
	case err != nil:
		s.log.Error("thread", "thread", id, "err", err)
		httpError(w, http.StatusInternalServerError, "cannot open the thread")
		return
	}
	defer s.release(th)
	select { // one turn at a time; a client that leaves while waiting gives up its place
	case th.turn <- struct{}{}:
	case <-r.Context().Done():
		return
	}
	res, code, err := s.runTurn(r.Context(), th, text)
	<-th.turn
	if err != nil {
		httpError(w, code, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// readText reads {"text": "..."}: one JSON object, no other field, a text
// that is valid UTF-8, not blank and at most cfg.maxText bytes.
func (s *server) readText(w http.ResponseWriter, r *http.Request) (string, error) {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, s.cfg.maxBody))
	dec.DisallowUnknownFields()
	var in struct {
		Text *string `json:"text"`
	}
	if err := dec.Decode(&in); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return "", fmt.Errorf("body over %d bytes", s.cfg.maxBody)
		}
		return "", fmt.Errorf(`body: want {"text": "..."}: %v`, err)
	}
	if dec.More() {
		return "", errors.New(`body: want one JSON object {"text": "..."}`)
	}
	switch {
	case in.Text == nil:
		return "", errors.New(`body: "text" is missing`)
	case strings.TrimSpace(*in.Text) == "":
		return "", errors.New(`"text" is blank`)
	case len(*in.Text) > s.cfg.maxText:
		return "", fmt.Errorf(`"text" is %d bytes, over %d`, len(*in.Text), s.cfg.maxText)
	case !utf8.ValidString(*in.Text):
		return "", errors.New(`"text" is not valid UTF-8`)
	}
	return *in.Text, nil
}

// taskView is a task as GET /threads/{id}/tasks shows it.
type taskView struct {
	ID           string           `json:"task_id"`
	Name         string           `json:"name,omitempty"`
	Description  string           `json:"description,omitempty"`
	Status       bgtype.Status    `json:"status"`
	Result       json.RawMessage  `json:"result,omitempty"`
	Error        string           `json:"error,omitempty"`
	ErrorKind    bgtype.ErrorKind `json:"error_kind,omitempty"`
	CancelReason string           `json:"cancel_reason,omitempty"`
	Progress     *bgtype.Progress `json:"progress,omitempty"`
	RunID        string           `json:"run_id,omitempty"`
	Announced    bool             `json:"announced"`

	// Input is the task's question while it is awaiting_input: answer it
	// with POST /threads/{id}/tasks/{task}/messages and its id as in_reply_to.
	Input *bgtype.InputRequest `json:"input_request,omitempty"`
	// Instance is the server instance that runs (or ran) the task.
	Instance string `json:"instance,omitempty"`
}

// maxListed is how many tasks GET /threads/{id}/tasks shows at most.
const maxListed = 500

// getTasks lists the thread's tasks, oldest first; only that owner's.
func (s *server) getTasks(w http.ResponseWriter, r *http.Request) {
	id := pathThread(w, r)
	if id == "" {
		return
	}
	seq, err := s.m.Owner(id).List(r.Context())
	if err != nil {
		s.log.Error("list", "thread", id, "err", err)
		httpError(w, http.StatusInternalServerError, "cannot list the tasks")
		return
	}
	out := struct {
		Thread    string     `json:"thread"`
		Live      bool       `json:"live"`         // the thread has a Plugin in this process
		News      int        `json:"news"`         // events that arrived since its last turn began
		Running   bool       `json:"turn_running"` // a turn is running
		Tasks     []taskView `json:"tasks"`
		Truncated bool       `json:"truncated,omitempty"`
	}{Thread: id, Tasks: []taskView{}}
	for meta := range seq {
		if len(out.Tasks) == maxListed {
			out.Truncated = true
			break
		}
		out.Tasks = append(out.Tasks, taskView{ID: meta.ID, Name: meta.Name, Description: meta.Description, Status: meta.Status,
			Result: meta.Result, Error: meta.Error, ErrorKind: meta.ErrorKind, CancelReason: meta.CancelReason,
			Progress: meta.Progress, Input: meta.Input, Instance: meta.Instance, RunID: meta.Parent.RunID, Announced: meta.Announced})
	}
	if th := s.live(id); th != nil {
		th.mu.Lock()
		out.Live, out.News, out.Running = true, th.news, th.stop != nil
		th.mu.Unlock()
	}
	writeJSON(w, http.StatusOK, out)
}

// postStop stops the thread's running turn: its model call ends and its
// run ends cancelled, with the tasks it started. The optional query
// parameter reason says why: the model reads it in each cancelled event
// (bgtask.StopReason without it). With no turn running it does nothing and
// says so. In a fleet, a turn running on another instance has its run's
// tasks cancelled with the reason (stopElsewhere).
func (s *server) postStop(w http.ResponseWriter, r *http.Request) {
	id := pathThread(w, r)
	if id == "" {
		return
	}
	stopped := false
	if th := s.live(id); th != nil {
		th.mu.Lock()
		if th.stop != nil {
			th.stop(userStop{reason: r.URL.Query().Get("reason")})
			stopped = true
		}
		th.mu.Unlock()
	}
	if !stopped {
		switch inst, n, err := s.stopElsewhere(r.Context(), id, r.URL.Query().Get("reason")); {
		case err != nil && r.Context().Err() == nil:
			s.log.Error("stop elsewhere", "thread", id, "err", err)
			httpError(w, http.StatusInternalServerError, "cannot stop the thread's turn on another instance")
			return
		case inst != "":
			writeJSON(w, http.StatusOK, map[string]any{"thread": id, "stopped": true, "instance": inst, "cancelled": n})
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"thread": id, "stopped": stopped})
}
