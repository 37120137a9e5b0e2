package agent_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"strings"
	"sync"
	"time"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/agent"
	"github.com/bgtask/bgtask/bgtype"
)

// chat is a server's value of one thread: its tools and its conversation.
type chat struct {
	tools []agent.Tool
	mu    sync.Mutex // guards news
	news  int        // events that arrived between turns
}

// A server keeps its threads in a Threads: one Plugin each, made at the
// thread's first request, turns one at a time, the least recently used
// idle thread closed at the cap (its tasks go on; its next Plugin hears
// what they report, once). Here the cap is one thread, so bob's request
// closes alice's Plugin, and alice's next one hears her research end.
func ExampleThreads() {
	ctx := context.Background()
	m, err := bgtask.New()
	if err != nil {
		log.Fatal(err)
	}
	defer m.Shutdown(ctx)
	woken := make(chan struct{}, 1)

	threads, err := agent.NewThreads(m, agent.ThreadsConfig[*chat]{
		MaxThreads:  1,                // a server: thousands (default 10,000)
		IdleTimeout: 30 * time.Minute, // the default
		New: func(ctx context.Context, thread string, p *agent.Plugin) (*chat, error) {
			return &chat{tools: agent.Tools(p.Owner())}, nil
		},
		OnWake: func(th *agent.Thread[*chat], ev bgtype.Event) { // between turns: count it, or start a turn
			th.Value().mu.Lock()
			th.Value().news++
			th.Value().mu.Unlock()
			fmt.Println("woken:", th.ID(), ev.Kind)
			woken <- struct{}{}
		},
		OnClose: func(th *agent.Thread[*chat], why agent.CloseReason, err error) {
			fmt.Println("closed:", th.ID(), why, err)
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer threads.Close(ctx) // before the Manager's shutdown

	fmt.Println(handle(ctx, threads, "alice", "research lsm trees", "run-1"))
	close(researchGate) // the research ends between alice's turns
	<-woken
	fmt.Println(handle(ctx, threads, "bob", "hello", "run-2"))
	fmt.Println(handle(ctx, threads, "alice", "what came back?", "run-3"))
	fmt.Println("live:", threads.Len(), "held:", threads.Held())
	// Output:
	// alice: started research
	// woken: alice completed
	// closed: alice evicted <nil>
	// bob: hello
	// closed: bob evicted <nil>
	// alice: heard [completed research]
	// live: 1 held: 0
	// closed: alice shutdown <nil>
}

// handle is one request of a thread: one turn, of one model step here.
func handle(ctx context.Context, threads *agent.Threads[*chat], thread, text, runID string) string {
	th, err := threads.Acquire(ctx, thread) // held until Release: never closed meanwhile
	if errors.Is(err, agent.ErrTooManyThreads) {
		return "503: every thread is busy"
	} else if err != nil {
		return err.Error()
	}
	defer th.Release()
	turn, err := th.Turn(ctx, bgtask.RunInfo{RunID: runID}) // one turn of the thread at a time
	if errors.Is(err, bgtask.ErrRunOpen) {
		return "409: a turn of the thread runs on another instance"
	} else if err != nil {
		return err.Error()
	}
	defer turn.End(ctx, bgtask.RunOutcome{})
	msgs, err := th.Plugin().BeforeInference(ctx) // the events, once each
	if err != nil {
		return err.Error()
	}
	return thread + ": " + modelStep(ctx, th, msgs, text)
}

// researchGate holds the example's research until its first turn is over.
var researchGate = make(chan struct{})

// modelStep stands for the model's step: it starts a research when asked, and
// reports the events it was handed.
func modelStep(ctx context.Context, th *agent.Thread[*chat], msgs []agent.PromptMessage, text string) string {
	var heard []string
	for _, pm := range msgs {
		if pm.Event != nil {
			heard = append(heard, string(pm.Event.Kind)+" "+pm.Event.Name)
		}
	}
	if len(heard) > 0 {
		return fmt.Sprint("heard ", heard)
	}
	if strings.HasPrefix(text, "research") {
		if _, err := th.Plugin().Owner().Spawn(ctx, func(context.Context, *bgtask.Task) (any, error) {
			<-researchGate
			return "findings", nil
		}, bgtask.WithName("research")); err != nil {
			return err.Error()
		}
		return "started research"
	}
	return text
}
