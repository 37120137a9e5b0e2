package bga2a

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/bgtask/bgtask/bgtype"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2aclient/agentcard"

	"github.com/bgtask/bgtask"
)

// ownerHeader is the header the test servers take the owner from; a real
// host reads the owner from the request's authentication.
const ownerHeader = "X-Test-Owner"

// bundle is one test's Manager, server and HTTP server.
type bundle struct {
	m   *bgtask.Manager
	srv *Server
	hs  *httptest.Server
}

// setup serves agent on a fresh Manager, the owner named by ownerHeader.
func setup(t *testing.T, agent bgtask.Func, opts ...Option) *bundle {
	t.Helper()
	m, err := bgtask.New()
	if err != nil {
		t.Fatal(err)
	}
	opts = append([]Option{WithOwnerFunc(func(r *http.Request) (string, error) {
		if o := r.Header.Get(ownerHeader); o != "" {
			return o, nil
		}
		return "", errors.New("no owner")
	})}, opts...)
	srv, err := New(m, agent, Card{Name: "test agent", Description: "a sub-agent under test",
		Skills: []a2a.AgentSkill{{ID: "echo", Name: "echo", Description: "echoes"}}}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		if err := m.Shutdown(context.Background()); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		srv.Close()
		hs.Close()
	})
	return &bundle{m: m, srv: srv, hs: hs}
}

// headerTransport adds the owner header to every request.
type headerTransport struct{ owner string }

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(ownerHeader, h.owner)
	return http.DefaultTransport.RoundTrip(r)
}

// client returns an a2a-go JSON-RPC client acting for owner, made from the
// served agent card.
func (b *bundle) client(t *testing.T, owner string) *a2aclient.Client {
	t.Helper()
	hc := &http.Client{Transport: headerTransport{owner}}
	card, err := agentcard.NewResolver(hc).Resolve(t.Context(), b.hs.URL)
	if err != nil {
		t.Fatal(err)
	}
	c, err := a2aclient.NewFromCard(t.Context(), card, a2aclient.WithJSONRPCTransport(hc))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Destroy() })
	return c
}

// userText is a user message of one text part, for task id if not empty.
func userText(id a2a.TaskID, text string) *a2a.MessageSendParams {
	m := a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: text})
	m.TaskID = id
	return &a2a.MessageSendParams{Message: m}
}

// messages reads a sub-agent's inbox one message at a time.
type messages struct {
	t   *bgtask.Task
	buf []bgtype.Message
}

func (r *messages) next(ctx context.Context) (bgtype.Message, error) {
	for len(r.buf) == 0 {
		if err := r.t.Inbox().Wait(ctx); err != nil {
			return bgtype.Message{}, err
		}
		for _, ev := range r.t.Inbox().Drain() {
			if m, ok := ev.Message(); ok {
				r.buf = append(r.buf, m)
			}
		}
	}
	m := r.buf[0]
	r.buf = r.buf[1:]
	return m, nil
}

// echoAgent reports progress, then returns its first message echoed.
func echoAgent(ctx context.Context, t *bgtask.Task) (any, error) {
	r := &messages{t: t}
	m, err := r.next(ctx)
	if err != nil {
		return nil, err
	}
	if err := t.Emit("progress", map[string]int{"percent": 50}); err != nil {
		return nil, err
	}
	return "echo: " + m.Content, nil
}

// chatAgent answers each message it receives with "got: <text>" until it
// receives "bye", then completes with how many it got.
func chatAgent(ctx context.Context, t *bgtask.Task) (any, error) {
	r := &messages{t: t}
	for n := 1; ; n++ {
		m, err := r.next(ctx)
		if err != nil {
			return nil, err
		}
		if m.Content == "bye" {
			return map[string]any{"messages": n}, nil
		}
		if err := t.Emit(bgtype.EventTypeMessage, bgtype.Message{From: t.ID(), Content: "got: " + m.Content}); err != nil {
			return nil, err
		}
	}
}

// statesOf lists the kinds and states of stream events, for comparison.
func statesOf(evs []a2a.Event) []string {
	var out []string
	for _, ev := range evs {
		switch ev := ev.(type) {
		case *a2a.Task:
			out = append(out, "task:"+string(ev.Status.State))
		case *a2a.TaskStatusUpdateEvent:
			s := "status:" + string(ev.Status.State)
			if ev.Final {
				s += ":final"
			}
			out = append(out, s)
		case *a2a.TaskArtifactUpdateEvent:
			out = append(out, "artifact:"+string(ev.Artifact.ID))
		case *a2a.Message:
			out = append(out, "message")
		}
	}
	return out
}

// textOf returns the text of a message's or artifact's first part.
func textOf(parts a2a.ContentParts) string {
	if len(parts) == 0 {
		return ""
	}
	if p, ok := parts[0].(a2a.TextPart); ok {
		return p.Text
	}
	return ""
}
