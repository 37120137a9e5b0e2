package bgtask_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/bgtask/bgtask"
)

// A deploy stops the Manager softly: a task that finishes before the
// deadline keeps its result, one still running at the deadline ends
// interrupted, as after a crash. Stop returns at the deadline; Shutdown
// then waits for the function it cut.
func ExampleManager_Stop() {
	m, err := bgtask.New(bgtask.WithInstance("inst-1"))
	if err != nil {
		log.Fatal(err)
	}
	agent := m.Owner("thread-1")
	finish := make(chan struct{})
	quick, _ := agent.Spawn(context.Background(), func(context.Context, *bgtask.Task) (any, error) {
		<-finish
		return "report written", nil
	})
	slow, _ := agent.Spawn(context.Background(), func(ctx context.Context, _ *bgtask.Task) (any, error) {
		<-ctx.Done() // cut at the deadline
		return "too late", nil
	})

	deadline, cut := context.WithCancel(context.Background()) // a deploy's 30 s, say
	stopped := make(chan error, 1)
	go func() { stopped <- m.Stop(deadline) }()
	close(finish)
	if _, err := m.Wait(context.Background(), quick); err != nil { // it ended on its own
		log.Fatal(err)
	}
	cut()
	err = <-stopped
	var se *bgtask.ShutdownError
	fmt.Println(errors.As(err, &se) && len(se.Interrupted) == 1 && se.Interrupted[0] == slow)
	for _, id := range []string{quick, slow} {
		meta, _ := m.Get(context.Background(), id)
		fmt.Println(meta.Status, cmp.Or(string(meta.Result), meta.Error))
	}
	// Stop did not wait for the cut function to return; Shutdown does.
	fmt.Println(m.Shutdown(context.Background()))
	// Output:
	// true
	// completed "report written"
	// interrupted bgtask: interrupted: the runtime that ran it (instance "inst-1") shut down before it ended; it will not be re-run
	// <nil>
}
