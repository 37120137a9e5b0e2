// Package crashloop is the exactly-once crash test that the durable stores
// share (store/sqlitestore, store/pgstore): an agent loop driven through a
// Plugin, with plain tasks, sub-agents that run their own Plugin on their
// own inbox, and the sub-agents' children, run in real processes that are
// killed with SIGKILL at seeded moments. It is for those tests only.
//
// The helper side (Serve, Log) runs in each killed process; the test side
// (Run, Judge) starts and kills them and judges what the model was handed.
//
// # The log
//
// Each process appends to its own log, one line per fact, written and
// synced before the process goes on:
//
//	runstart <loop> <turn>          a run of the loop started (RunStart returned)
//	runend <loop> <turn>            the run ended
//	spawn <loop> <id> <kind>        the loop spawned a task: plain, sub-agent or child
//	taking <loop> <step> <id>       the step is about to commit the mark of id (before the Commit);
//	                                step 0 is a RunEnd's
//	marked <loop> <step>            that Commit returned
//	markfail <loop> <step>          that Commit failed
//	mark - - <id>                   a mark committed outside any step
//	took <loop> <step> <id> <event> the step handed the terminal event of id to the model
//	stepend <loop> <step>           the step returned
//	ended <id> <status>             this process committed the end of its task id (WithObserver)
//	left <id>                       the sub-agent id returns with children running
//
// The owner's loop is named "owner"; a sub-agent's loop is named by its
// task id. The model hears an end it was handed ("took") once the loop
// proves the model answered it: the Plugin marks it at the loop's next
// boundary, or at RunEnd ("taking", then "marked"). A hand-out a kill cut
// before that proof is handed out again. Every record that ended is heard
// exactly once, but one whose proving commit a kill cut may be marked and
// heard in no log (in flight), and a record's status is the one its
// process committed ("ended"), if it did: no process ends what a live one
// runs.
package crashloop

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/bgtask/bgtask/store"

	"github.com/bgtask/bgtask"
)

// OwnerLoop names the owner's loop in the log.
const OwnerLoop = "owner"

// Log is a process's log. Every line is written and synced before the
// writer goes on; each is also echoed to the test as "log <line>". It is
// safe for concurrent use.
//
// A Log made with a stop point blocks the owner's loop for good right after
// its stop-th write (a kill comes next): the writer prints "stopped" and
// never returns. The other goroutines (tasks, sub-agents' loops) go on.
type Log struct {
	mu     sync.Mutex // guards the fields below, and the writes
	f      *os.File
	echo   io.Writer
	stopAt int // the owner loop's write after which it blocks; 0: never
	writes int // the owner loop's writes so far
}

// OpenLog opens (creating or appending) the log at path, echoing to echo,
// with the stop point stopAt (0 for none).
func OpenLog(path string, echo io.Writer, stopAt int) (*Log, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("crashloop: open log: %w", err)
	}
	return &Log{f: f, echo: echo, stopAt: stopAt}, nil
}

// Close closes the log file.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.f.Close()
}

// Say prints a control line to the test (not to the log).
func (l *Log) Say(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.echo, format+"\n", args...)
}

// write appends lines as one write, synced, and echoes them. When loop is
// the owner's and this is its stop-th write, it never returns.
func (l *Log) write(loop string, lines ...string) {
	if len(lines) == 0 {
		return
	}
	var b strings.Builder
	for _, line := range lines {
		b.WriteString(line)
		b.WriteByte('\n')
	}
	l.mu.Lock()
	if _, err := l.f.WriteString(b.String()); err != nil {
		panic(fmt.Sprintf("crashloop: write log: %v", err)) // the verdict would be wrong: stop here
	}
	if err := l.f.Sync(); err != nil {
		panic(fmt.Sprintf("crashloop: sync log: %v", err))
	}
	for _, line := range lines {
		fmt.Fprintln(l.echo, "log", line)
	}
	stop := false
	if loop == OwnerLoop {
		l.writes++
		stop = l.writes == l.stopAt
	}
	l.mu.Unlock()
	if stop {
		l.halt()
	}
}

// halt prints "stopped" and blocks the calling goroutine (the owner's
// loop) for good: the kill comes next.
func (l *Log) halt() {
	l.Say("stopped")
	select {}
}

// stepKey is the context key of the step a Plugin phase runs for.
type stepKey struct{}

type step struct {
	loop string
	n    int
}

// stepContext returns ctx carrying the loop's step n, so that the marks its
// Plugin commits are logged as that step's.
func stepContext(ctx context.Context, loop string, n int) context.Context {
	return context.WithValue(ctx, stepKey{}, step{loop, n})
}

// Commit logs the marks among actions before a Store commits them, and
// returns the function that logs the outcome; a helper's Store calls it
// around its Commit:
//
//	done := log.Commit(ctx, actions)
//	err := s.Store.Commit(ctx, owner, actions...)
//	done(err)
//
// A mark committed for a step (the Plugin's hand-out commit) is a "taking"
// line per id; any other is a "mark" line.
func (l *Log) Commit(ctx context.Context, actions []store.Action) func(error) {
	var ids []string
	for _, a := range actions {
		if a.Op == store.OpAnnounce {
			ids = append(ids, a.IDs...)
		}
	}
	if len(ids) == 0 {
		return func(error) {}
	}
	st, ok := ctx.Value(stepKey{}).(step)
	if !ok {
		lines := make([]string, len(ids))
		for i, id := range ids {
			lines[i] = "mark - - " + id
		}
		l.write("", lines...)
		return func(error) {}
	}
	lines := make([]string, len(ids))
	for i, id := range ids {
		lines[i] = fmt.Sprintf("taking %s %d %s", st.loop, st.n, id)
	}
	l.write(st.loop, lines...)
	return func(err error) {
		if err != nil {
			l.write(st.loop, fmt.Sprintf("markfail %s %d", st.loop, st.n))
			return
		}
		l.write(st.loop, fmt.Sprintf("marked %s %d", st.loop, st.n))
	}
}

// Observe logs the end of each task this process commits; a helper's
// Manager calls it (bgtask.WithObserver).
func (l *Log) Observe(tr bgtask.Transition) {
	if tr.To.IsTerminal() {
		l.write("", fmt.Sprintf("ended %s %s", tr.Task.ID, tr.To))
	}
}
