package bgmcp_test

import (
	"bufio"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Over stdio each bad line gets its JSON-RPC error (id null) and the
// session goes on: the ping after it is answered.
func TestBadLine(t *testing.T) {
	for _, tc := range []struct {
		name, line, want string
	}{
		{"malformed", `{"jsonrpc":"2.0","id":2,"method":`, `{"error":{"code":-32700,"message":"Parse error: not a JSON value"},"id":null,"jsonrpc":"2.0"}`},
		{"deep", strings.Repeat("[", 100_000), `{"error":{"code":-32700,"message":"Parse error: not a JSON value"},"id":null,"jsonrpc":"2.0"}`},
		{"too deep object", strings.Repeat(`{"a":`, 20_000) + "1" + strings.Repeat("}", 20_000), `{"error":{"code":-32700,"message":"Parse error: not a JSON value"},"id":null,"jsonrpc":"2.0"}`},
		{"deep object", strings.Repeat(`{"a":`, 5_000) + "1" + strings.Repeat("}", 5_000), `{"error":{"code":-32600,"message":"Invalid Request: not a JSON-RPC 2.0 message"},"id":null,"jsonrpc":"2.0"}`},
		{"too long", `{"jsonrpc":"2.0","id":2,"method":"ping","params":{"_meta":{"pad":"` + strings.Repeat("p", 200_000) + `"}}}`, `{"error":{"code":-32700,"message":"Parse error: line too long"},"id":null,"jsonrpc":"2.0"}`},
		{"batch", `[{"jsonrpc":"2.0","id":2,"method":"ping"}]`, `{"error":{"code":-32600,"message":"Invalid Request: batches are not supported"},"id":null,"jsonrpc":"2.0"}`},
		{"not JSON-RPC", `{"id":2,"method":"ping"}`, `{"error":{"code":-32600,"message":"Invalid Request: not a JSON-RPC 2.0 message"},"id":null,"jsonrpc":"2.0"}`},
		{"not an object", `42`, `{"error":{"code":-32600,"message":"Invalid Request: not a JSON-RPC 2.0 message"},"id":null,"jsonrpc":"2.0"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newServer(t, newManager(t), nil)
			inR, inW := io.Pipe()
			outR, outW := io.Pipe()
			ran := make(chan error, 1)
			go func() {
				ran <- s.Run(context.Background(), &mcp.IOTransport{Reader: inR, Writer: outW, MaxLineLength: 200_000})
			}()
			out := bufio.NewScanner(outR)
			exchange := func(line string) string {
				t.Helper()
				if _, err := io.WriteString(inW, line+"\n"); err != nil {
					t.Fatal(err)
				}
				if !out.Scan() {
					t.Fatalf("no answer to %.40q: %v", line, out.Err())
				}
				return out.Text()
			}
			exchange(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`)
			if _, err := io.WriteString(inW, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"); err != nil {
				t.Fatal(err)
			}
			if got := exchange(tc.line); got != tc.want {
				t.Errorf("answer %s, want %s", got, tc.want)
			}
			if got, want := exchange(`{"jsonrpc":"2.0","id":3,"method":"ping"}`), `{"jsonrpc":"2.0","id":3,"result":{}}`; got != want {
				t.Errorf("ping after it: %s, want %s", got, want)
			}
			inW.Close()
			if err := <-ran; err != nil {
				t.Errorf("Run: %v", err)
			}
			outR.Close()
		})
	}
}
