package bgmcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	bgmcp "github.com/bgtask/bgtask/mcp"
)

// handlerClient is a raw JSON-RPC client that calls an http.Handler in
// process (no network), so that it runs in a synctest bubble.
type handlerClient struct {
	t       testing.TB
	h       http.Handler
	session string
}

// do serves one request and returns its status and body.
func (c *handlerClient) do(method string, msg any) (int, string) {
	c.t.Helper()
	var body []byte
	if msg != nil {
		body = mustJSON(c.t, msg)
	}
	req := httptest.NewRequest(method, "/mcp", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	if c.session != "" {
		req.Header.Set("Mcp-Session-Id", c.session)
	}
	rec := httptest.NewRecorder()
	c.h.ServeHTTP(rec, req)
	if c.session == "" {
		c.session = rec.Header().Get("Mcp-Session-Id")
	}
	return rec.Code, rec.Body.String()
}

// open opens a session, or returns why not.
func (c *handlerClient) open() (int, string) {
	c.t.Helper()
	code, body := c.do(http.MethodPost, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{
		"protocolVersion": "2025-11-25",
		"capabilities":    map[string]any{},
		"clientInfo":      map[string]any{"name": "raw", "version": "0"},
	}})
	if code != http.StatusOK {
		return code, body
	}
	return c.do(http.MethodPost, map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
}

// An idle session ends after the session timeout, and the Server forgets
// it and its owner; a session in use does not.
func TestSessionTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newServer(t, newManager(t), nil, bgmcp.WithSessionTimeout(time.Minute))
		idle, busy := &handlerClient{t: t, h: s.Handler()}, &handlerClient{t: t, h: s.Handler()}
		for _, c := range []*handlerClient{idle, busy} {
			if code, body := c.open(); code != http.StatusAccepted {
				t.Fatalf("open: %d %s", code, body)
			}
			// The default owner is the session's: it is known once used.
			if code, body := c.do(http.MethodPost, map[string]any{"jsonrpc": "2.0", "id": 2, "method": "tasks/list", "params": map[string]any{}}); code != http.StatusOK {
				t.Fatalf("tasks/list: %d %s", code, body)
			}
		}
		if got := s.OpenSessions(); got != 2 {
			t.Fatalf("%d open sessions, want 2", got)
		}
		if got := bgmcp.KnownOwners(s); got != 2 {
			t.Fatalf("%d known owners, want 2", got)
		}
		for range 3 {
			time.Sleep(40 * time.Second)
			if code, body := busy.do(http.MethodPost, map[string]any{"jsonrpc": "2.0", "id": 3, "method": "ping"}); code != http.StatusOK {
				t.Fatalf("ping: %d %s", code, body)
			}
		}
		synctest.Wait()
		if got := s.OpenSessions(); got != 1 {
			t.Errorf("after 2 min: %d open sessions, want 1", got)
		}
		if got := bgmcp.KnownOwners(s); got != 1 {
			t.Errorf("after 2 min: %d known owners, want 1", got)
		}
		if code, body := idle.do(http.MethodPost, map[string]any{"jsonrpc": "2.0", "id": 3, "method": "ping"}); code != http.StatusNotFound {
			t.Errorf("ping on the idle session: %d %s", code, body)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if got, owners := s.OpenSessions(), bgmcp.KnownOwners(s); got != 0 || owners != 0 {
			t.Errorf("after 3 min: %d open sessions, %d known owners, want none", got, owners)
		}
	})
}

// At the cap, a request that would open a session is refused with 503 and
// a clear error, until a session ends. Run's sessions do not count.
func TestSessionCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newServer(t, newManager(t), nil, bgmcp.WithMaxSessions(2))
		dialRaw(t, s) // a session over Run
		var open []*handlerClient
		for range 2 {
			c := &handlerClient{t: t, h: s.Handler()}
			if code, body := c.open(); code != http.StatusAccepted {
				t.Fatalf("open: %d %s", code, body)
			}
			open = append(open, c)
		}
		third := &handlerClient{t: t, h: s.Handler()}
		code, body := third.open()
		var resp struct {
			ID    any `json:"id"`
			Error struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		decode(t, json.RawMessage(body), &resp)
		if want := "bgmcp: too many open sessions (at most 2): end a session or retry later"; code != http.StatusServiceUnavailable || resp.Error.Code != -32600 || resp.Error.Message != want || resp.ID != nil {
			t.Errorf("third session: %d %s", code, body)
		}
		if third.session != "" || s.OpenSessions() != 3 {
			t.Errorf("third session opened: %q, %d open", third.session, s.OpenSessions())
		}
		// The open sessions still work.
		if code, body := open[0].do(http.MethodPost, map[string]any{"jsonrpc": "2.0", "id": 2, "method": "ping"}); code != http.StatusOK || !strings.Contains(body, `"result":{}`) {
			t.Errorf("ping: %d %s", code, body)
		}
		if code, body := open[0].do(http.MethodDelete, nil); code != http.StatusNoContent {
			t.Fatalf("delete: %d %s", code, body)
		}
		if code, body := third.open(); code != http.StatusAccepted {
			t.Errorf("after a delete: %d %s", code, body)
		}
		if got := s.OpenSessions(); got != 3 {
			t.Errorf("%d open sessions, want 3", got)
		}
		for _, c := range []*handlerClient{open[1], third} {
			c.do(http.MethodDelete, nil)
		}
	})
}

// An open GET stream (where a task's progress goes) keeps its session
// open past the idle timeout, as WithSessionTimeout says; once the stream
// closes, the session ends after the timeout.
func TestSessionTimeoutGETStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newServer(t, newManager(t), nil, bgmcp.WithSessionTimeout(time.Minute))
		c := &handlerClient{t: t, h: s.Handler()}
		if code, body := c.open(); code != http.StatusAccepted {
			t.Fatalf("open: %d %s", code, body)
		}
		ctx, cancel := context.WithCancel(t.Context())
		streamed := make(chan int)
		go func() {
			req := httptest.NewRequestWithContext(ctx, http.MethodGet, "/mcp", nil)
			req.Header.Set("Accept", "text/event-stream")
			req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
			req.Header.Set("Mcp-Session-Id", c.session)
			rec := httptest.NewRecorder()
			s.Handler().ServeHTTP(rec, req)
			streamed <- rec.Code
		}()
		synctest.Wait() // the stream is open
		time.Sleep(3 * time.Minute)
		synctest.Wait()
		if got := s.OpenSessions(); got != 1 {
			t.Fatalf("after 3 min with the GET stream open: %d open sessions, want 1", got)
		}
		cancel()
		if code := <-streamed; code != http.StatusOK {
			t.Errorf("GET stream: %d", code)
		}
		time.Sleep(59 * time.Second)
		synctest.Wait()
		if got := s.OpenSessions(); got != 1 {
			t.Errorf("59 s after the stream closed: %d open sessions, want 1", got)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if got := s.OpenSessions(); got != 0 {
			t.Errorf("a minute after the stream closed: %d open sessions, want 0", got)
		}
	})
}
