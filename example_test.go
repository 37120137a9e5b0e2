package bgtask_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/bgtask/bgtask/internal/memstore"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"

	"github.com/bgtask/bgtask"
)

// drainUntilEnded drains ib until it has seen the terminal event of every id,
// and returns every event drained, in order.
func drainUntilEnded(ctx context.Context, ib *bgtask.Inbox, ids ...string) []bgtype.Event {
	open := make(map[string]bool, len(ids))
	for _, id := range ids {
		open[id] = true
	}
	var evs []bgtype.Event
	for len(open) > 0 {
		if err := ib.Wait(ctx); err != nil {
			log.Fatal(err)
		}
		n := len(evs)
		evs = ib.AppendDrain(evs)
		for _, ev := range evs[n:] {
			if ev.Kind.IsTerminal() {
				delete(open, ev.TaskID)
			}
		}
	}
	return evs
}

// A task reports progress while it runs; its owner drains the events, and
// the terminal one carries the result.
func Example() {
	ctx := context.Background()
	m, err := bgtask.New()
	if err != nil {
		log.Fatal(err)
	}
	agent := m.Owner("thread-1")
	id, err := agent.Spawn(ctx, func(ctx context.Context, t *bgtask.Task) (any, error) {
		for _, p := range []int{50, 100} {
			if err := t.Emit("progress", map[string]int{"percent": p}); err != nil {
				return nil, err
			}
		}
		return map[string]string{"summary": "three sources agree"}, nil
	}, bgtask.WithName("research"), bgtask.WithWake(bgtype.WakeOnActivity))
	if err != nil {
		log.Fatal(err)
	}

	ib, _ := agent.Inbox()
	for _, ev := range drainUntilEnded(ctx, ib, id) {
		switch ev.Kind {
		case bgtype.EventCustom:
			fmt.Println(ev.Kind, ev.EventType, string(ev.Payload))
		case bgtype.EventCompleted:
			fmt.Println(ev.Kind, string(ev.Result))
		}
	}
	meta, _ := agent.Get(ctx, id)
	fmt.Println(meta.Name, meta.Status)

	if err := m.Shutdown(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// custom progress {"percent":50}
	// custom progress {"percent":100}
	// completed {"summary":"three sources agree"}
	// research completed
}

// Names are unique among an owner's tasks that have not ended.
func ExampleOwner_Spawn() {
	ctx := context.Background()
	m, err := bgtask.New()
	if err != nil {
		log.Fatal(err)
	}
	agent := m.Owner("thread-1")
	release := make(chan struct{})
	id, err := agent.Spawn(ctx, func(ctx context.Context, t *bgtask.Task) (any, error) {
		select {
		case <-release:
			return 42, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}, bgtask.WithName("fetch"), bgtask.WithDescription("fetch the page"))
	if err != nil {
		log.Fatal(err)
	}
	running, _ := agent.Get(ctx, id)
	fmt.Println(running.Name, running.Type, running.Status)

	_, err = agent.Spawn(ctx, func(context.Context, *bgtask.Task) (any, error) { return nil, nil },
		bgtask.WithName("fetch"))
	fmt.Println(errors.Is(err, bgtask.ErrDuplicateName))

	close(release)
	done, err := agent.Wait(ctx, id)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(done.Status, string(done.Result))

	if err := m.Shutdown(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// fetch task running
	// true
	// completed 42
}

// CancelTree cancels a task and the tasks it spawned: the root with cause
// ErrCanceled, its descendants with ErrCanceled (parent).
func ExampleManager_CancelTree() {
	ctx := context.Background()
	m, err := bgtask.New()
	if err != nil {
		log.Fatal(err)
	}
	agent := m.Owner("thread-1")
	children := make(chan string, 2)
	root, err := agent.Spawn(ctx, func(ctx context.Context, t *bgtask.Task) (any, error) {
		for range 2 {
			// Spawned with the task's ctx: linked to it as its parent.
			id, err := agent.Spawn(ctx, func(ctx context.Context, t *bgtask.Task) (any, error) {
				<-ctx.Done()
				return nil, context.Cause(ctx)
			})
			if err != nil {
				return nil, err
			}
			children <- id
		}
		<-ctx.Done()
		return nil, context.Cause(ctx)
	})
	if err != nil {
		log.Fatal(err)
	}
	ids := []string{root, <-children, <-children}

	n, err := m.CancelTree(ctx, root)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("signalled:", n)
	for _, id := range ids {
		meta, err := agent.Wait(ctx, id)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s: %s\n", meta.Status, meta.Error)
	}

	if err := m.Shutdown(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// signalled: 3
	// cancelled: bgtask: task cancelled
	// cancelled: bgtask: parent task cancelled
	// cancelled: bgtask: parent task cancelled
}

// Shutdown cancels every task with cause ErrShutdown and waits for them.
func ExampleManager_Shutdown() {
	ctx := context.Background()
	m, err := bgtask.New()
	if err != nil {
		log.Fatal(err)
	}
	agent := m.Owner("thread-1")
	started := make(chan struct{})
	var cause error
	id, err := agent.Spawn(ctx, func(ctx context.Context, t *bgtask.Task) (any, error) {
		close(started)
		<-ctx.Done()
		cause = context.Cause(ctx)
		return nil, ctx.Err()
	})
	if err != nil {
		log.Fatal(err)
	}
	<-started

	if err := m.Shutdown(ctx); err != nil {
		log.Fatal(err)
	}
	meta, err := m.Get(ctx, id)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(meta.Status)
	fmt.Println(cause)
	fmt.Println(errors.Is(cause, bgtask.ErrShutdown))

	_, err = agent.Spawn(ctx, func(context.Context, *bgtask.Task) (any, error) { return nil, nil })
	fmt.Println(err)
	// Output:
	// cancelled
	// bgtask: manager shut down
	// true
	// bgtask: manager closed
}

// An Inbox hands the events it can no longer deliver to its OnClosed
// fallback (InboxConfig): those left undrained at Close and those sent afterwards.
func ExampleInbox() {
	ib := bgtask.NewInbox(bgtask.InboxConfig{OnClosed: func(ev bgtype.Event) {
		fmt.Println("fallback:", ev.Kind, ev.TaskID)
	}})
	progress := bgtype.Event{Kind: bgtype.EventCustom, TaskID: "task_a", EventType: "progress", Payload: []byte(`1`)}

	_ = ib.Send(progress)
	for _, ev := range ib.Drain() {
		fmt.Println("drained:", ev.Kind, ev.EventType, string(ev.Payload))
	}

	_ = ib.Send(progress) // left undrained
	ib.Close()
	err := ib.Send(bgtype.Event{Kind: bgtype.EventCompleted, TaskID: "task_a"})
	fmt.Println(errors.Is(err, bgtask.ErrInboxClosed))
	fmt.Println("fallback count:", ib.Stats().Fallback)
	// Output:
	// drained: custom progress 1
	// fallback: custom task_a
	// fallback: completed task_a
	// true
	// fallback count: 2
}

// A parent messages a sub-agent, which reads it from its own inbox.
func ExampleOwner_Send() {
	ctx := context.Background()
	m, err := bgtask.New()
	if err != nil {
		log.Fatal(err)
	}
	parent := m.Owner("thread-1")
	id, err := parent.SpawnAgent(ctx, func(ctx context.Context, t *bgtask.Task) (any, error) {
		for {
			if err := t.Inbox().Wait(ctx); err != nil {
				return nil, err
			}
			for _, ev := range t.Inbox().Drain() {
				if msg, ok := ev.Message(); ok {
					return "done: " + msg.Content, nil
				}
			}
		}
	}, bgtask.WithName("writer"))
	if err != nil {
		log.Fatal(err)
	}

	if _, err := parent.Send(ctx, id, bgtype.Message{From: "parent", Content: "write the summary"}); err != nil {
		log.Fatal(err)
	}
	meta, err := parent.Wait(ctx, id)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(meta.Type, meta.Status, string(meta.Result))

	_, err = parent.Send(ctx, id, bgtype.Message{From: "parent", Content: "again"})
	fmt.Println(errors.Is(err, bgtask.ErrTerminal))

	if err := m.Shutdown(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// sub_agent completed "done: write the summary"
	// true
}

// After a restart, Restore turns what the previous process left running into
// interrupted records, each reported to its owner once. Closures are never
// re-run.
func ExampleManager_Restore() {
	ctx := context.Background()
	st := memstore.New()
	// What a process that died left behind.
	_ = st.Commit(ctx, "thread-1", store.UpsertAction(bgtype.TaskMeta{
		ID: "task_00000000000070008000000000000001", Owner: "thread-1", Status: bgtype.StatusRunning, Instance: "inst_gone",
	}))

	m, _ := bgtask.New(bgtask.WithStore(st))
	defer m.Shutdown(ctx)
	interrupted, _ := m.Restore(ctx, "thread-1")
	for _, meta := range interrupted {
		fmt.Println(meta.Status, meta.Attempt)
	}
	inbox, _ := m.Inbox("thread-1")
	for _, ev := range inbox.Drain() {
		fmt.Println(ev.Kind)
	}
	// Output:
	// interrupted 1
	// interrupted
}
