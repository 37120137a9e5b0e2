package bgmcp

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The SDK decodes tools/call params into a struct without the tasks
// protocol's "task" field, so the request would reach the server without
// it. Before the SDK reads a message, taskTransport (stdio, in-memory) and
// Server.serveHTTP (streamable HTTP) move "task" into the params' _meta
// under taskMetaKey, where the middleware finds it. A client's own
// taskMetaKey entry is always removed first: only "task" sets it.
const taskMetaKey = "io.github.bgtask/task-request"

// moveTaskParam moves a tools/call's "task" into _meta. It returns params
// unchanged when there is nothing to do or they are not an object.
func moveTaskParam(params json.RawMessage) json.RawMessage {
	return moveToMeta(params, "task", taskMetaKey, func(obj map[string]json.RawMessage) json.RawMessage {
		task, ok := obj["task"]
		delete(obj, "task")
		if !ok || bytes.Equal(bytes.TrimSpace(task), []byte("null")) {
			return nil
		}
		return task
	})
}

// listenMetaKey marks, in the params' _meta, a subscriptions/listen that
// asked for task status notifications (notifications.taskIds), which the
// SDK's params drop: taskTransport and Server.serveHTTP move the field
// there as they move "task". A client's own entry is always removed first.
const listenMetaKey = "io.github.bgtask/listen-task-ids"

// moveListenTaskIDs moves a subscriptions/listen's notifications.taskIds
// into _meta. It returns params unchanged when there is nothing to do or
// they are not an object.
func moveListenTaskIDs(params json.RawMessage) json.RawMessage {
	return moveToMeta(params, "taskIds", listenMetaKey, func(obj map[string]json.RawMessage) json.RawMessage {
		var notes map[string]json.RawMessage
		n, ok := obj["notifications"]
		if !ok || json.Unmarshal(n, &notes) != nil {
			return nil
		}
		ids, ok := notes["taskIds"]
		if !ok {
			return nil
		}
		delete(notes, "taskIds")
		if b, err := json.Marshal(notes); err == nil {
			obj["notifications"] = b
		}
		return ids
	})
}

// moveToMeta rewrites params, a JSON object, so that _meta holds under key
// what take removes from it (nothing when take returns nil), after removing
// a client's own entry under key. It returns params unchanged when neither
// field nor key is in them, or they are not an object.
func moveToMeta(params json.RawMessage, field, key string, take func(obj map[string]json.RawMessage) json.RawMessage) json.RawMessage {
	if !bytes.Contains(params, []byte(`"`+field+`"`)) && !bytes.Contains(params, []byte(key)) {
		return params
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(params, &obj) != nil {
		return params
	}
	meta := map[string]json.RawMessage{}
	if m, ok := obj["_meta"]; ok && json.Unmarshal(m, &meta) != nil {
		return params
	}
	delete(meta, key)
	if v := take(obj); v != nil {
		meta[key] = v
	}
	if len(meta) > 0 {
		b, err := json.Marshal(meta)
		if err != nil {
			return params
		}
		obj["_meta"] = b
	} else {
		delete(obj, "_meta")
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return params
	}
	return b
}

// rewriteParams moves what the SDK's params of method would drop into
// their _meta.
func rewriteParams(method string, params json.RawMessage) json.RawMessage {
	switch method {
	case "tools/call":
		return moveTaskParam(params)
	case "subscriptions/listen":
		return moveListenTaskIDs(params)
	}
	return params
}

// taskTransport is a transport whose connection moves the "task" of every
// incoming tools/call into _meta. Its session id is the inner one, or a
// random one when the inner transport has none (stdio, in-memory); Connect
// records the session in s and sets id.
type taskTransport struct {
	inner mcp.Transport
	s     *Server
	id    string
}

func (t *taskTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	id := c.SessionID()
	if id == "" {
		id = rand.Text()
	}
	t.id = id
	t.s.openRun(id)
	return &taskConn{Connection: c, id: id}, nil
}

type taskConn struct {
	mcp.Connection
	id string
}

func (c *taskConn) SessionID() string { return c.id }

func (c *taskConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if req, ok := msg.(*jsonrpc.Request); ok && err == nil {
		req.Params = rewriteParams(req.Method, req.Params)
	}
	return msg, err
}

// rewriteBody applies rewriteParams to each request of a body.
func rewriteBody(body []byte) []byte {
	if !bytes.Contains(body, []byte("tools/call")) && !bytes.Contains(body, []byte("subscriptions/listen")) {
		return body
	}
	trimmed := bytes.TrimSpace(body)
	var msgs []map[string]json.RawMessage
	batch := len(trimmed) > 0 && trimmed[0] == '['
	if batch {
		if json.Unmarshal(trimmed, &msgs) != nil {
			return body
		}
	} else {
		var one map[string]json.RawMessage
		if json.Unmarshal(trimmed, &one) != nil {
			return body
		}
		msgs = append(msgs, one)
	}
	for _, m := range msgs {
		var method string
		if json.Unmarshal(m["method"], &method) == nil && m["params"] != nil {
			m["params"] = rewriteParams(method, m["params"])
		}
	}
	var out []byte
	var err error
	if batch {
		out, err = json.Marshal(msgs)
	} else {
		out, err = json.Marshal(msgs[0])
	}
	if err != nil {
		return body
	}
	return out
}
