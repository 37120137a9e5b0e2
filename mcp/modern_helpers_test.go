package bgmcp_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	bgmcp "github.com/bgtask/bgtask/mcp"
)

// modernClient speaks the 2026-07-28 revision over plain net/http: no
// session, each request with its protocol version, client info and
// capabilities in its _meta (declaring the tasks extension when tasks is
// set), and the Mcp-Protocol-Version header.
type modernClient struct {
	t      *testing.T
	url    string
	token  string // a bearer token, if any
	tasks  bool   // declare the tasks extension
	nextID int
}

// rpcError is a JSON-RPC error as it came.
type rpcError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
}

// modernReply is one HTTP exchange of a modernClient.
type modernReply struct {
	status int
	result json.RawMessage
	err    *rpcError
	body   string
}

// post sends one request: params (nil for none) get the per-request _meta.
func (c *modernClient) post(method string, params map[string]any) modernReply {
	c.t.Helper()
	if params == nil {
		params = map[string]any{}
	}
	caps := map[string]any{}
	if c.tasks {
		caps["extensions"] = map[string]any{bgmcp.TasksExtension: map[string]any{}}
	}
	params["_meta"] = map[string]any{
		"io.modelcontextprotocol/protocolVersion":    bgmcp.ProtocolVersion,
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "modern", "version": "0"},
		"io.modelcontextprotocol/clientCapabilities": caps,
	}
	c.nextID++
	h := http.Header{"Mcp-Method": {method}}
	// The routing headers: a tool's name, a task's id (the extension's).
	if name, ok := params["name"].(string); ok && method == "tools/call" {
		h.Set("Mcp-Name", name)
	} else if id, ok := params["taskId"].(string); ok {
		h.Set("Mcp-Name", id)
	}
	return c.rawHeader(mustJSON(c.t, map[string]any{"jsonrpc": "2.0", "id": c.nextID, "method": method, "params": params}), bgmcp.ProtocolVersion, h)
}

// raw posts body as it is, with the version header when not "".
func (c *modernClient) raw(body []byte, version string) modernReply {
	c.t.Helper()
	return c.rawHeader(body, version, nil)
}

// rawHeader is raw with more headers.
func (c *modernClient) rawHeader(body []byte, version string, h http.Header) modernReply {
	c.t.Helper()
	req, err := http.NewRequest(http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if version != "" {
		req.Header.Set("Mcp-Protocol-Version", version)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	r := modernReply{status: res.StatusCode, body: string(b)}
	data := b
	if strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		data = nil
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(nil, 1<<20) // a whole result is longer than a default line
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok && strings.Contains(d, `"id"`) {
				data = []byte(d)
			}
		}
	}
	var resp struct {
		Result json.RawMessage `json:"result"`
		Error  *rpcError       `json:"error"`
	}
	if len(data) > 0 && json.Unmarshal(data, &resp) == nil {
		r.result, r.err = resp.Result, resp.Error
	}
	return r
}

// result sends a request and returns its result, failing the test on
// anything else.
func (c *modernClient) result(method string, params map[string]any) json.RawMessage {
	c.t.Helper()
	r := c.post(method, params)
	if r.status != http.StatusOK || r.err != nil || r.result == nil {
		c.t.Fatalf("%s: %d %.400s", method, r.status, r.body)
	}
	return r.result
}

// fail sends a request that must fail with a JSON-RPC error, and returns it.
func (c *modernClient) fail(method string, params map[string]any) *rpcError {
	c.t.Helper()
	r := c.post(method, params)
	if r.err == nil {
		c.t.Fatalf("%s: %d %.400s, want an error", method, r.status, r.body)
	}
	return r.err
}

// modernTask is a task as the tasks extension shows it.
type modernTask struct {
	ResultType     string `json:"resultType"`
	TaskID         string `json:"taskId"`
	Status         string `json:"status"`
	StatusMessage  string `json:"statusMessage"`
	CreatedAt      string `json:"createdAt"`
	LastUpdatedAt  string `json:"lastUpdatedAt"`
	TTLMs          *int64 `json:"ttlMs"`
	PollIntervalMs int64  `json:"pollIntervalMs"`
	InputRequests  map[string]struct {
		Method string `json:"method"`
		Params struct {
			Mode            string          `json:"mode"`
			Message         string          `json:"message"`
			RequestedSchema json.RawMessage `json:"requestedSchema"`
		} `json:"params"`
	} `json:"inputRequests"`
	Result *payload  `json:"result"`
	Error  *rpcError `json:"error"`
}

// start calls a tool and returns the task handle it must answer with.
func (c *modernClient) start(tool string, args any) modernTask {
	c.t.Helper()
	var tk modernTask
	decode(c.t, c.result("tools/call", map[string]any{"name": tool, "arguments": args}), &tk)
	if tk.ResultType != "task" || tk.TaskID == "" || tk.Status != "working" {
		c.t.Fatalf("tools/call %s: %+v, want a task handle", tool, tk)
	}
	return tk
}

// get is tasks/get.
func (c *modernClient) get(handle string) modernTask {
	c.t.Helper()
	var tk modernTask
	decode(c.t, c.result("tasks/get", map[string]any{"taskId": handle}), &tk)
	return tk
}

// until polls tasks/get while the task's status is in from (the loop ends
// on the status, never on time).
func (c *modernClient) until(handle string, from ...string) modernTask {
	c.t.Helper()
	for {
		tk := c.get(handle)
		if !slices.Contains(from, tk.Status) {
			return tk
		}
	}
}
