package main

import (
	"context"
	"crypto/rand"
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
// closed, its conversation dropped) to make room; a thread nobody used for
// cfg.idleTimeout is evicted too. agent.Threads keeps them (lifecycle.go).
type server struct {
	m       *bgtask.Manager
	client  openai.Client
	model   string
	cfg     config
	log     *slog.Logger
	threads *agent.Threads[*thread]
}

func newServer(m *bgtask.Manager, client openai.Client, model string, cfg config, log *slog.Logger) (*server, error) {
	s := &server{m: m, client: client, model: model, cfg: cfg, log: log}
	threads, err := newThreads(s)
	if err != nil {
		return nil, err
	}
	s.threads = threads
	return s, nil
}

// thread is the server's value of one conversation: its tools and its
// history. Its turns run one at a time (agent.Thread.Turn).
type thread struct {
	id    string
	tools *bgopenai.Toolset

	mu      sync.Mutex // guards the fields below
	history []entry    // the conversation, oldest first; written by the turn holder
	turning bool       // a turn runs
	news    int        // events that arrived since the last turn began (OnWake)
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

// live returns the live thread id, or nil.
func (s *server) live(id string) *thread {
	if lt, ok := s.threads.Lookup(id); ok {
		return lt.Value()
	}
	return nil
}

// newThread makes the value of the thread id, whose Plugin p is made: its
// tools.
func (s *server) newThread(id string, p *agent.Plugin) (*thread, error) {
	ts, err := bgopenai.New(append(agent.Tools(p.Owner()),
		researchTool(p.Owner(), s.client, s.model), lookupTool(p.Owner(), s.client, s.model, s.cfg.foreground)),
		bgopenai.WithParallel(toolParallel))
	if err != nil {
		return nil, err // the registry closes p: nothing to commit, no run was opened
	}
	return &thread{id: id, tools: ts}, nil
}

// toolParallel is how many tool calls of one model reply run at once.
const toolParallel = 4

// woken is the thread's OnWake callback: an event arrived while no turn
// of the thread was open. The server does not run a turn by itself (the
// user is not there to read it); it counts the news, which GET
// /threads/{id}/tasks shows, logs it, and the next turn delivers the
// events.
func (th *thread) woken(log *slog.Logger, ev bgtype.Event) {
	th.mu.Lock()
	th.news++
	th.mu.Unlock()
	log.Info("wake", "thread", th.id, "task_id", ev.TaskID, "name", ev.Name, "kind", ev.Kind)
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
	lt, err := s.threads.Acquire(r.Context(), id)
	switch {
	case errors.Is(err, agent.ErrTooManyThreads):
		httpError(w, http.StatusServiceUnavailable, fmt.Sprintf("too many busy threads: at most %d", s.cfg.maxThreads))
		return
	case err != nil && r.Context().Err() != nil:
		return // the client left while the thread was being evicted
	case err != nil:
		s.log.Error("thread", "thread", id, "err", err)
		httpError(w, http.StatusInternalServerError, "cannot open the thread")
		return
	}
	defer lt.Release()
	runID := "run_" + rand.Text()
	turn, err := startTurn(r.Context(), lt, runID) // one turn at a time
	switch {
	case err != nil && errors.Is(err, context.Cause(r.Context())):
		return // the client left while waiting: it gave up its place
	case errors.Is(err, bgtask.ErrRunOpen): // in a fleet: a turn of the thread runs on another instance
		s.log.Info("run open elsewhere", "thread", id, "err", err)
		httpError(w, http.StatusConflict, errTurnElsewhere.Error())
		return
	case err != nil:
		s.log.Error("run start", "thread", id, "err", err)
		httpError(w, http.StatusInternalServerError, "cannot start the turn")
		return
	}
	res, code, err := s.runTurn(r.Context(), lt, turn, text)
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
	out := struct {
		Thread    string     `json:"thread"`
		Live      bool       `json:"live"`         // the thread has a Plugin in this process
		News      int        `json:"news"`         // events that arrived since its last turn began
		Running   bool       `json:"turn_running"` // a turn is running
		Tasks     []taskView `json:"tasks"`
		Truncated bool       `json:"truncated,omitempty"`
	}{Thread: id, Tasks: []taskView{}}
	for meta, err := range s.m.Owner(id).List(r.Context()) {
		if err != nil {
			s.log.Error("list", "thread", id, "err", err)
			httpError(w, http.StatusInternalServerError, "cannot list the tasks")
			return
		}
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
		out.Live, out.News, out.Running = true, th.news, th.turning
		th.mu.Unlock()
	}
	writeJSON(w, http.StatusOK, out)
}

// postStop stops the thread's running turn, on whichever instance of a
// fleet it runs (bgtask.Owner.StopRun): its model call ends and its run
// ends cancelled, with the tasks it started. The optional query parameter
// reason says why: the model reads it in each cancelled event
// (bgtask.StopReason without it). With no turn running it does nothing and
// says so. A turn on another instance is named, with how many tasks the
// stop cancelled.
func (s *server) postStop(w http.ResponseWriter, r *http.Request) {
	id := pathThread(w, r)
	if id == "" {
		return
	}
	stop, err := s.m.Owner(id).StopRun(r.Context(), r.URL.Query().Get("reason"))
	switch {
	case err != nil && r.Context().Err() == nil:
		s.log.Error("stop", "thread", id, "err", err)
		httpError(w, http.StatusInternalServerError, "cannot stop the thread's turn")
	case stop.RunID != "" && stop.Instance != s.cfg.instance:
		s.log.Info("stop elsewhere", "thread", id, "run_id", stop.RunID, "instance", stop.Instance, "cancelled", stop.Canceled)
		writeJSON(w, http.StatusOK, map[string]any{"thread": id, "stopped": true, "instance": stop.Instance, "cancelled": stop.Canceled})
	default:
		writeJSON(w, http.StatusOK, map[string]any{"thread": id, "stopped": stop.RunID != ""})
	}
}
