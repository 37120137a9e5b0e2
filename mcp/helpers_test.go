package bgmcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/bgtask/bgtask"
	bgmcp "github.com/bgtask/bgtask/mcp"
)

// newManager returns a Manager on the memory store, shut down at the end of
// the test.
func newManager(t *testing.T, opts ...bgtask.Option) *bgtask.Manager {
	t.Helper()
	m, err := bgtask.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Shutdown(context.Background()) })
	return m
}

// newServer returns a Server on m with the test tools added.
func newServer(t *testing.T, m *bgtask.Manager, tools *testTools, opts ...bgmcp.Option) *bgmcp.Server {
	t.Helper()
	s, err := bgmcp.NewServer(m, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if tools != nil {
		for _, tool := range tools.list() {
			if err := s.AddTool(tool); err != nil {
				t.Fatal(err)
			}
		}
	}
	return s
}

// testTools are the host tools of the tests: "echo" answers at once,
// "slow" runs until released or cancelled and reports progress first.
type testTools struct {
	release chan struct{} // closed: slow returns
	started chan string   // slow sends its message when it runs
	ended   chan error    // slow sends its ctx's error when ctx ended
	steps   int           // progress reports slow makes before waiting
}

func newTestTools() *testTools {
	return &testTools{release: make(chan struct{}), started: make(chan string, 16), ended: make(chan error, 16), steps: 3}
}

var echoSchema = json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"],"additionalProperties":false}`)

func (tt *testTools) list() []bgmcp.Tool {
	return []bgmcp.Tool{
		{
			Name: "echo", Description: "Echoes text.", InputSchema: echoSchema,
			Run: func(ctx context.Context, call *bgmcp.Call) (any, error) {
				var args struct {
					Text *string `json:"text"`
				}
				if err := json.Unmarshal(call.Arguments, &args); err != nil || args.Text == nil {
					return nil, errors.New("echo: argument \"text\" (a string) is required")
				}
				return map[string]string{"echo": *args.Text}, nil
			},
		},
		{
			Name: "slow", Description: "Runs until released.", InputSchema: echoSchema,
			Run: func(ctx context.Context, call *bgmcp.Call) (any, error) {
				var args struct {
					Text string `json:"text"`
				}
				_ = json.Unmarshal(call.Arguments, &args)
				for i := 1; i <= tt.steps; i++ {
					call.Progress(float64(i), float64(tt.steps), fmt.Sprintf("step %d", i))
				}
				tt.started <- args.Text
				select {
				case <-tt.release:
					return map[string]string{"done": args.Text}, nil
				case <-ctx.Done():
					tt.ended <- ctx.Err()
					return nil, context.Cause(ctx)
				}
			},
		},
		{
			Name: "must_task", Description: "Only as a task.", InputSchema: echoSchema, TaskSupport: bgmcp.TaskRequired,
			Run: func(context.Context, *bgmcp.Call) (any, error) { return "ok", nil },
		},
		{
			Name: "fails", Description: "Always fails.", InputSchema: echoSchema,
			Run: func(context.Context, *bgmcp.Call) (any, error) { return nil, errors.New("fails: no luck") },
		},
	}
}

// rawClient speaks JSON-RPC to the server over a client connection of the
// SDK (in-memory or streamable HTTP): the SDK's client has no task methods.
type rawClient struct {
	t    *testing.T
	conn mcp.Connection
	init json.RawMessage // the initialize result

	mu      sync.Mutex
	nextID  int64
	waiting map[int64]chan *jsonrpc.Response
	notes   chan *jsonrpc.Request // notifications from the server
	calls   chan *jsonrpc.Request // requests from the server (answer with reply)
	done    chan struct{}
}

// dialRaw connects a raw client to s over an in-memory transport and
// initializes the session. The session ends at the end of the test.
func dialRaw(t *testing.T, s *bgmcp.Server) *rawClient {
	t.Helper()
	return dialRawCaps(t, s, map[string]any{})
}

// dialRawCaps is dialRaw for a client that declares caps in initialize.
func dialRawCaps(t *testing.T, s *bgmcp.Server, caps map[string]any) *rawClient {
	t.Helper()
	st, ct := mcp.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- s.Run(ctx, st) }()
	conn, err := ct.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := newRawCaps(t, conn, caps)
	t.Cleanup(func() {
		cancel()
		<-ran
	})
	return c
}

func newRaw(t *testing.T, conn mcp.Connection) *rawClient {
	return newRawCaps(t, conn, map[string]any{})
}

func newRawCaps(t *testing.T, conn mcp.Connection, caps map[string]any) *rawClient {
	c := &rawClient{t: t, conn: conn, waiting: map[int64]chan *jsonrpc.Response{},
		notes: make(chan *jsonrpc.Request, 100), calls: make(chan *jsonrpc.Request, 100), done: make(chan struct{})}
	go c.readLoop()
	t.Cleanup(func() {
		conn.Close()
		<-c.done
	})
	c.init = c.call("initialize", map[string]any{
		"protocolVersion": "2025-11-25",
		"capabilities":    caps,
		"clientInfo":      map[string]any{"name": "raw", "version": "0"},
	})
	c.notify("notifications/initialized", map[string]any{})
	return c
}

func (c *rawClient) readLoop() {
	defer close(c.done)
	for {
		msg, err := c.conn.Read(context.Background())
		if err != nil {
			return
		}
		switch msg := msg.(type) {
		case *jsonrpc.Response:
			id, _ := msg.ID.Raw().(int64)
			c.mu.Lock()
			ch := c.waiting[id]
			delete(c.waiting, id)
			c.mu.Unlock()
			if ch != nil {
				ch <- msg
			}
		case *jsonrpc.Request:
			if msg.IsCall() {
				c.calls <- msg
			} else {
				c.notes <- msg
			}
		}
	}
}

// send sends a request and returns the channel its response arrives on.
func (c *rawClient) send(method string, params any) <-chan *jsonrpc.Response {
	c.t.Helper()
	c.mu.Lock()
	c.nextID++
	id := c.nextID
	ch := make(chan *jsonrpc.Response, 1)
	c.waiting[id] = ch
	c.mu.Unlock()
	jid, err := jsonrpc.MakeID(float64(id))
	if err != nil {
		c.t.Fatal(err)
	}
	if err := c.conn.Write(context.Background(), &jsonrpc.Request{ID: jid, Method: method, Params: mustJSON(c.t, params)}); err != nil {
		c.t.Fatal(err)
	}
	return ch
}

// call sends a request and returns its result, failing the test on an
// error response.
func (c *rawClient) call(method string, params any) json.RawMessage {
	c.t.Helper()
	res, err := c.try(method, params)
	if err != nil {
		c.t.Fatalf("%s: %v", method, err)
	}
	return res
}

// try sends a request and returns its result or its error.
func (c *rawClient) try(method string, params any) (json.RawMessage, *jsonrpc.Error) {
	c.t.Helper()
	return response(<-c.send(method, params))
}

func response(r *jsonrpc.Response) (json.RawMessage, *jsonrpc.Error) {
	if r.Error != nil {
		var we *jsonrpc.Error
		if errors.As(r.Error, &we) {
			return nil, we
		}
		return nil, &jsonrpc.Error{Message: r.Error.Error()}
	}
	return r.Result, nil
}

// reply answers a request from the server with result, or with a JSON-RPC
// error when rpcErr is not nil.
func (c *rawClient) reply(req *jsonrpc.Request, result any, rpcErr *jsonrpc.Error) {
	c.t.Helper()
	res := &jsonrpc.Response{ID: req.ID}
	if rpcErr != nil {
		res.Error = rpcErr
	} else {
		res.Result = mustJSON(c.t, result)
	}
	if err := c.conn.Write(context.Background(), res); err != nil {
		c.t.Fatal(err)
	}
}

func (c *rawClient) notify(method string, params any) {
	c.t.Helper()
	if err := c.conn.Write(context.Background(), &jsonrpc.Request{Method: method, Params: mustJSON(c.t, params)}); err != nil {
		c.t.Fatal(err)
	}
}

// task is the tasks protocol's view of a task.
type task struct {
	TaskID        string `json:"taskId"`
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage"`
	CreatedAt     string `json:"createdAt"`
	LastUpdatedAt string `json:"lastUpdatedAt"`
	TTL           *int64 `json:"ttl"`
	PollInterval  int64  `json:"pollInterval"`
}

// callTask calls a tool as a task and returns the task handle.
func (c *rawClient) callTask(tool string, args any, meta map[string]any) task {
	c.t.Helper()
	params := map[string]any{"name": tool, "arguments": args, "task": map[string]any{"ttl": 60000}}
	if meta != nil {
		params["_meta"] = meta
	}
	var res struct {
		Task task `json:"task"`
	}
	decode(c.t, c.call("tools/call", params), &res)
	if res.Task.TaskID == "" {
		c.t.Fatalf("tools/call as a task: no task id")
	}
	return res.Task
}

func (c *rawClient) getTask(id string) task {
	c.t.Helper()
	var tk task
	decode(c.t, c.call("tasks/get", map[string]any{"taskId": id}), &tk)
	return tk
}

func decode(t *testing.T, b json.RawMessage, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("decoding %s: %v", b, err)
	}
}

func mustJSON(t testing.TB, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
