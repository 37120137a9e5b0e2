package bgtask_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/agent"
	"github.com/bgtask/bgtask/bgtype"
)

// The README's "Tags, timeouts and cancel reasons": a tagged task with a
// timeout, listed by its tag, cancelled with a reason, and waited for.
func Example_readmeTags() {
	ctx := context.Background()
	m, err := bgtask.New()
	if err != nil {
		log.Fatal(err)
	}
	defer m.Shutdown(ctx)
	owner := m.Owner("thread-1")
	crawl := func(ctx context.Context, t *bgtask.Task) (any, error) {
		<-ctx.Done() // crawls until cancelled
		return nil, context.Cause(ctx)
	}
	if err := tagsTimeoutsReasons(ctx, owner, crawl); err != nil {
		log.Fatal(err)
	}
	// Output:
	// listed running [crawl eu]
	// cancelled the user changed plans
}

func tagsTimeoutsReasons(ctx context.Context, owner bgtask.Owner, crawl bgtask.Func) error {
	id, err := owner.Spawn(ctx, crawl,
		bgtask.WithTags("crawl", "eu"),    // free-form, set once, filterable
		bgtask.WithTimeout(2*time.Minute)) // ctx ends with a cause matching ErrTimeout
	if err != nil {
		return err
	}

	for meta, err := range owner.ListTagged(ctx, "crawl") { // list_tasks: {"tag":"crawl"}
		if err != nil {
			return err
		}
		fmt.Println("listed", meta.Status, meta.Tags)
	}

	// Cancel with a reason: on the record, in context.Cause, in the event and get_task.
	_, err = owner.Cancel(ctx, id, bgtask.WithReason("the user changed plans"))

	// Wait returns a *TaskError for a failed task, as errgroup users expect.
	meta, err := owner.Wait(ctx, id)
	switch {
	case errors.Is(err, bgtask.ErrTimeout):
		log.Printf("%s ran out of time", meta.ID)
	case err != nil:
		var te *bgtask.TaskError
		if errors.As(err, &te) {
			log.Printf("%s failed (%s): %s", te.TaskID, te.Kind, te.Message) // kind: error, timeout, panic
		}
	}
	fmt.Println(meta.Status, meta.CancelReason)
	return nil
}

// runSearch stands for a search that may be quick or slow.
func runSearch(ctx context.Context, query string) (any, error) {
	return []string{query + ".txt"}, nil
}

// The README's "A slow call becomes a background task": a tool runs its
// work with Owner.Foreground; this quick call returns its result.
func Example_readmeForeground() {
	ctx := context.Background()
	m, err := bgtask.New()
	if err != nil {
		log.Fatal(err)
	}
	defer m.Shutdown(ctx)
	owner := m.Owner("thread-1")
	search := agent.Tool{ // a tool of your own, beside agent.Tools(owner): an adapter takes both
		Name:        "search",
		Description: "Searches the notes.",
		Schema:      json.RawMessage(`{"type":"object","additionalProperties":false,"required":["query"],"properties":{"query":{"type":"string"}}}`),
		Call: func(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
			var in struct{ Query string }
			if err := json.Unmarshal(args, &in); err != nil {
				return nil, err
			}
			res, err := owner.Foreground(ctx, 30*time.Second, func(ctx context.Context, t *bgtask.Task) (any, error) {
				return runSearch(ctx, in.Query) // may take 100 ms or 10 minutes
			}, bgtask.WithDescription("search "+in.Query))
			return agent.ToolOutput(res.Result, err) // the result or the promotion notice, escaped and cut
		},
	}
	out, err := search.Call(ctx, json.RawMessage(`{"query":"lsm trees"}`))
	fmt.Println(string(out), err)
	// Output: ["lsm trees.txt"] <nil>
}

// takeEvents drains the owner's inbox at a step boundary and marks the
// terminal events announced before the model sees them.
func takeEvents(ctx context.Context, owner bgtask.Owner, ib *bgtask.Inbox) []bgtype.Event {
	evs := ib.Drain()
	var ids []string
	for _, ev := range evs {
		if ev.Kind.IsTerminal() {
			ids = append(ids, ev.TaskID)
		}
	}
	if err := owner.MarkAnnounced(ctx, ids...); err != nil {
		log.Printf("announcement marks not committed: %v", err) // hand the events out anyway
	}
	return evs
}

// The README's "Durable delivery": a host that drains the inbox itself
// marks the terminal events it takes as announced.
func Example_readmeTakeEvents() {
	ctx := context.Background()
	m, err := bgtask.New()
	if err != nil {
		log.Fatal(err)
	}
	defer m.Shutdown(ctx)
	owner := m.Owner("thread-1")
	ib, err := owner.Inbox()
	if err != nil {
		log.Fatal(err)
	}
	id, err := owner.Spawn(ctx, func(ctx context.Context, t *bgtask.Task) (any, error) { return "done", nil })
	if err != nil {
		log.Fatal(err)
	}
	if _, err := owner.Wait(ctx, id); err != nil {
		log.Fatal(err)
	}
	for _, ev := range takeEvents(ctx, owner, ib) {
		fmt.Println(ev.Kind, ev.TaskID == id, string(ev.Result))
	}
	// Output: completed true "done"
}

// The README's "Recovery at open": an administrator interrupts the records
// a dead process left running; the in-memory store has none.
func Example_readmeInterruptOrphaned() {
	ctx := context.Background()
	m, err := bgtask.New()
	if err != nil {
		log.Fatal(err)
	}
	defer m.Shutdown(ctx)
	n, err := m.InterruptOrphaned(ctx) // administrators only: not reachable from an Owner or a tool
	if err != nil {
		log.Printf("recovered %d records: %v", n, err)
	}
	fmt.Println(n, err)
	// Output: 0 <nil>
}

// The README's "Stopping for a deploy": Stop lets the running task end on
// its own, then Shutdown has nothing left to wait for.
func Example_readmeStop() {
	m, err := bgtask.New()
	if err != nil {
		log.Fatal(err)
	}
	release := make(chan struct{})
	id, err := m.Owner("thread-1").Spawn(context.Background(), func(context.Context, *bgtask.Task) (any, error) {
		<-release
		return "report written", nil
	})
	if err != nil {
		log.Fatal(err)
	}
	close(release) // it ends on its own, before the deploy's deadline

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := m.Stop(ctx); err != nil {
		log.Printf("deploy: %v", err) // the tasks it names read "interrupted", as after a crash
	}
	grace, cancelGrace := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancelGrace()
	_ = m.Shutdown(grace) // waits for the functions Stop cut to return, if they do in time

	meta, err := m.Get(context.Background(), id)
	fmt.Println(meta.Status, string(meta.Result), err)
	// Output: completed "report written" <nil>
}

// The README's "Idempotent spawn": a spawn retried with the same key
// returns the first one's task, whose function runs once.
func Example_readmeIdempotency() {
	ctx := context.Background()
	m, err := bgtask.New()
	if err != nil {
		log.Fatal(err)
	}
	defer m.Shutdown(ctx)
	o := m.Owner("thread-1")
	runs := 0
	build := func(ctx context.Context, t *bgtask.Task) (any, error) { runs++; return "built", nil }
	first, _ := o.Spawn(ctx, build, bgtask.WithIdempotencyKey("build-42"))
	again, _ := o.Spawn(ctx, build, bgtask.WithIdempotencyKey("build-42")) // again == first; build ran once
	if _, err := o.Wait(ctx, first); err != nil {
		log.Fatal(err)
	}
	fmt.Println(again == first, runs)
	// Output: true 1
}
