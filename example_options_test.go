package bgtask_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"strings"
	"time"

	"github.com/bgtask/bgtask"
)

// The tuning knobs come in three groups, each a struct whose zero fields
// keep their defaults: limits on what runs at once, caps on what a record
// keeps, and the timing of the Manager's writes. Here one task runs at a
// time and the next waits as queued; results are kept cut to 100 bytes.
func ExampleWithLimits() {
	ctx := context.Background()
	m, err := bgtask.New(
		bgtask.WithLimits(bgtask.Limits{MaxConcurrent: 1, QueueWhenFull: true}),
		bgtask.WithCaps(bgtask.Caps{MaxResultBytes: 100}),
		bgtask.WithTuning(bgtask.Tuning{ProgressInterval: 5 * time.Second}),
	)
	if err != nil {
		log.Fatal(err)
	}
	agent := m.Owner("thread-1")
	release := make(chan struct{})
	if _, err := agent.Spawn(ctx, func(context.Context, *bgtask.Task) (any, error) {
		<-release
		return "first", nil
	}); err != nil {
		log.Fatal(err)
	}
	id, err := agent.Spawn(ctx, func(context.Context, *bgtask.Task) (any, error) {
		return strings.Repeat("x", 1000), nil
	})
	if err != nil {
		log.Fatal(err)
	}
	meta, _ := agent.Get(ctx, id)
	fmt.Println(meta.Status)
	close(release)
	meta, _ = agent.Wait(ctx, id)
	fmt.Println(meta.Status, len(meta.Result) <= 100, strings.HasPrefix(string(meta.Result), `{"truncated":true,"original_bytes":1002`))

	_, err = bgtask.New(bgtask.WithLimits(bgtask.Limits{MaxDepth: -1}))
	fmt.Println(errors.Is(err, bgtask.ErrInvalidArgument), err)

	if err := m.Shutdown(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// queued
	// completed true true
	// true bgtask: invalid argument: Limits.MaxDepth is -1, must not be negative
}
