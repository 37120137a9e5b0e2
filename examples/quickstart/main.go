// Quickstart: an agent starts two background tasks, a tool that reports
// progress and a sub-agent that waits for instructions, then reads what they
// report from its inbox until both have ended.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"

	"github.com/bgtask/bgtask/bgtype"

	"github.com/bgtask/bgtask"
)

func main() {
	ctx := context.Background()
	m, err := bgtask.New()
	if err != nil {
		log.Fatal(err)
	}
	agent := m.Owner("thread-1")

	// A slow tool call that reports its progress.
	indexer, err := agent.Spawn(ctx, func(ctx context.Context, t *bgtask.Task) (any, error) {
		for p := 25; p <= 100; p += 25 {
			if err := t.Emit("progress", map[string]int{"percent": p}); err != nil {
				return nil, err
			}
		}
		return map[string]int{"files": 42}, nil
	}, bgtask.WithName("indexer"), bgtask.WithDescription("index the repository"),
		bgtask.WithWake(bgtype.WakeOnActivity)) // progress events reach the inbox too
	if err != nil {
		log.Fatal(err)
	}

	// A sub-agent: it has its own inbox and works once it is told what to do.
	writer, err := agent.SpawnAgent(ctx, func(ctx context.Context, t *bgtask.Task) (any, error) {
		for {
			if err := t.Inbox().Wait(ctx); err != nil {
				return nil, err
			}
			for _, ev := range t.Inbox().Drain() {
				if msg, ok := ev.Message(); ok {
					return fmt.Sprintf("draft for %q from %s", msg.Content, msg.From), nil
				}
			}
		}
	}, bgtask.WithName("writer"))
	if err != nil {
		log.Fatal(err)
	}
	_, err = agent.Send(ctx, writer, bgtype.Message{From: "thread-1", Content: "release notes"})
	if err != nil {
		log.Fatal(err)
	}

	// The agent loop: at each step boundary, drain the inbox and show the
	// model what happened, until both tasks have ended.
	ib, err := agent.Inbox()
	if err != nil {
		log.Fatal(err)
	}
	for open := map[string]bool{indexer: true, writer: true}; len(open) > 0; {
		if err := ib.Wait(ctx); err != nil {
			log.Fatal(err)
		}
		for _, ev := range ib.Drain() {
			b, err := json.Marshal(ev)
			if err != nil {
				log.Fatal(err)
			}
			fmt.Println("event:", string(b))
			if ev.Kind.IsTerminal() {
				delete(open, ev.TaskID)
			}
		}
	}

	// Final records, in creation order.
	for _, id := range []string{indexer, writer} {
		if _, err := agent.Wait(ctx, id); err != nil {
			if _, failed := errors.AsType[*bgtask.TaskError](err); !failed { // listed below
				log.Fatal(err)
			}
		}
	}
	for meta, err := range agent.List(ctx) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("task %s (%s, %s): %s %s\n", meta.Name, meta.Type, meta.ID, meta.Status, meta.Result)
	}

	if err := m.Shutdown(ctx); err != nil {
		log.Fatal(err)
	}
}
