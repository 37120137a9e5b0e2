package bgmcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The SDK's stdio connection ends at the first line it cannot decode, and
// with it the session. Run serves *mcp.StdioTransport and *mcp.IOTransport
// through lineTransport instead: one JSON-RPC message a line, as the stdio
// transport defines; a line that is not one is answered with a JSON-RPC
// error (id null) and the session goes on.

// lineTransport is newline-delimited JSON-RPC over r and w.
type lineTransport struct {
	r       io.ReadCloser
	w       io.WriteCloser
	maxLine int // longest line read, in bytes
}

// lineTransportFor returns the lineTransport serving t, or t itself.
func lineTransportFor(t mcp.Transport) mcp.Transport {
	switch t := t.(type) {
	case *mcp.StdioTransport:
		return &lineTransport{r: os.Stdin, w: nopWriteCloser{os.Stdout}, maxLine: lineCap(t.MaxLineLength)}
	case *mcp.IOTransport:
		if t.Reader != nil && t.Writer != nil {
			return &lineTransport{r: t.Reader, w: t.Writer, maxLine: lineCap(t.MaxLineLength)}
		}
	}
	return t
}

// lineCap is the line cap of an SDK transport's MaxLineLength: 0 is the
// SDK's default, a negative one no cap.
func lineCap(n int) int {
	switch {
	case n == 0:
		return mcp.DefaultMaxLineLength
	case n < 0:
		return int(^uint(0) >> 1)
	}
	return n
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

func (t *lineTransport) Connect(context.Context) (mcp.Connection, error) {
	c := &lineConn{t: t, incoming: make(chan lineMsg), closed: make(chan struct{})}
	go c.readLines()
	return c, nil
}

// lineConn is a connection of a lineTransport. Its reading goroutine ends
// when r ends or fails, or once the connection is closed and r's Read
// returns (as the SDK's, it cannot interrupt a Read of stdin).
type lineConn struct {
	t        *lineTransport
	incoming chan lineMsg
	closed   chan struct{}

	writeMu   sync.Mutex
	closeOnce sync.Once
	closeErr  error
}

// lineMsg is a message read, or why reading ended.
type lineMsg struct {
	msg jsonrpc.Message
	err error
}

// Codes of the JSON-RPC errors a bad line gets.
const (
	codeParseError = -32700
)

// readLines reads one message a line; a bad line is answered with an
// error and skipped.
func (c *lineConn) readLines() {
	br := bufio.NewReaderSize(c.t.r, 64<<10)
	for {
		line, tooLong, err := readLine(br, c.t.maxLine)
		if len(bytes.TrimSpace(line)) > 0 || tooLong {
			msg, bad := decodeLine(line, tooLong)
			if bad != nil {
				if werr := c.writeRaw(bad); werr != nil {
					c.deliver(lineMsg{err: werr})
					return
				}
			} else if !c.deliver(lineMsg{msg: msg}) {
				return
			}
		}
		if err != nil {
			c.deliver(lineMsg{err: err})
			return
		}
	}
}

// deliver hands m to Read; false when the connection closed first.
func (c *lineConn) deliver(m lineMsg) bool {
	select {
	case c.incoming <- m:
		return true
	case <-c.closed:
		return false
	}
}

// readLine reads a line without its end; past max bytes it discards the
// rest of the line and reports it too long.
func readLine(br *bufio.Reader, max int) (line []byte, tooLong bool, err error) {
	for {
		chunk, err := br.ReadSlice('\n')
		if !tooLong {
			if len(line)+len(chunk) > max+1 { // +1: the '\n'
				tooLong, line = true, nil
			} else {
				line = append(line, chunk...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return line, tooLong, err
	}
}

// decodeLine decodes a line's message, or returns the error response the
// line gets instead.
func decodeLine(line []byte, tooLong bool) (jsonrpc.Message, []byte) {
	switch {
	case tooLong:
		return nil, errorLine(codeParseError, "Parse error: line too long")
	case !json.Valid(line): // malformed, or nested deeper than encoding/json allows
		return nil, errorLine(codeParseError, "Parse error: not a JSON value")
	case bytes.HasPrefix(bytes.TrimSpace(line), []byte("[")):
		return nil, errorLine(jsonrpc.CodeInvalidRequest, "Invalid Request: batches are not supported")
	}
	msg, err := jsonrpc.DecodeMessage(bytes.TrimSpace(line))
	if err != nil {
		return nil, errorLine(jsonrpc.CodeInvalidRequest, "Invalid Request: not a JSON-RPC 2.0 message")
	}
	return msg, nil // taskConn moves a tools/call's "task"
}

// errorLine is a JSON-RPC error response with id null.
func errorLine(code int, message string) []byte {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": nil, "error": map[string]any{"code": code, "message": message}})
	return b
}

func (c *lineConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case m := <-c.incoming:
		return m.msg, m.err
	case <-c.closed:
		return nil, io.EOF
	}
}

func (c *lineConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return err
	}
	return c.writeRaw(b)
}

// writeRaw writes one line.
func (c *lineConn) writeRaw(b []byte) error {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	_, err := c.t.w.Write(append(b, '\n'))
	return err
}

func (c *lineConn) Close() error {
	c.closeOnce.Do(func() {
		close(c.closed)
		c.closeErr = errors.Join(c.t.r.Close(), c.t.w.Close())
	})
	return c.closeErr
}

func (c *lineConn) SessionID() string { return "" }
