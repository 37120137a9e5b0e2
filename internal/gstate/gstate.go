package gstate

import (
	"bytes"
	"runtime"
)

// Of returns the state ("runnable", "select", "chan receive", ...) of a
// goroutine whose stack has a frame starting with frame (a function's
// full name, say "github.com/bgtask/bgtask.(*Inbox).Wait"), or "" when
// none has. It reads every goroutine's stack, up to 1 MiB of them: call
// it from tests only. It is safe to call from any goroutine. Inside a
// testing/synctest bubble a durably blocked state carries " (durable)".
func Of(frame string) string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	for g := range bytes.SplitSeq(buf, []byte("\n\n")) {
		if !bytes.Contains(g, []byte("\n"+frame)) {
			continue
		}
		head, _, _ := bytes.Cut(g, []byte("\n")) // "goroutine 7 [runnable]:"
		_, state, _ := bytes.Cut(head, []byte("["))
		state, _, _ = bytes.Cut(state, []byte("]"))
		state, _, _ = bytes.Cut(state, []byte(",")) // "chan receive, 2 minutes"
		return string(state)
	}
	return ""
}
