package bgmcp_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	bgmcp "github.com/bgtask/bgtask/mcp"
)

// One body cap for HTTP: a body of exactly the cap is served, a task call
// included (moving its "task" makes it longer), and one byte more is
// refused with 413 and a clear error.
func TestBodyCap(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []bgmcp.Option
		cap  int
	}{
		{"default", nil, bgmcp.DefaultMaxBodyBytes},
		{"option", []bgmcp.Option{bgmcp.WithMaxBodyBytes(64 << 10)}, 64 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newServer(t, newManager(t), newTestTools(), tc.opts...)
			c := &handlerClient{t: t, h: s.Handler()}
			if code, body := c.open(); code != http.StatusAccepted {
				t.Fatalf("open: %d %s", code, body)
			}
			t.Cleanup(func() { c.do(http.MethodDelete, nil) })
			// body is a task call of echo padded to n bytes.
			body := func(n int) []byte {
				msg := func(pad string) []byte {
					return mustJSON(t, map[string]any{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": map[string]any{
						"name": "echo", "arguments": map[string]any{"text": "x"}, "task": map[string]any{}, "_meta": map[string]any{"pad": pad},
					}})
				}
				return msg(strings.Repeat("p", n-len(msg(""))))
			}
			for _, n := range []int{tc.cap, tc.cap + 1} {
				b := body(n)
				if len(b) != n {
					t.Fatalf("body of %d bytes, want %d", len(b), n)
				}
				req := httptest.NewRequest(http.MethodPost, "/mcp", bytes.NewReader(b))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
				req.Header.Set("Mcp-Session-Id", c.session)
				rec := httptest.NewRecorder()
				s.Handler().ServeHTTP(rec, req)
				switch n {
				case tc.cap:
					if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"taskId"`) {
						t.Errorf("%d bytes: %d %.300s", n, rec.Code, rec.Body.String())
					}
				default:
					var resp struct {
						Error struct {
							Code    int    `json:"code"`
							Message string `json:"message"`
						} `json:"error"`
					}
					_ = json.Unmarshal(rec.Body.Bytes(), &resp)
					if want := fmt.Sprintf("bgmcp: request body longer than %d bytes", tc.cap); rec.Code != http.StatusRequestEntityTooLarge || resp.Error.Code != -32600 || resp.Error.Message != want {
						t.Errorf("%d bytes: %d %.300s", n, rec.Code, rec.Body.String())
					}
				}
			}
		})
	}
}
