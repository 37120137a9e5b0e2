package bgtask_test

import (
	"context"
	"fmt"
	"log"

	"github.com/bgtask/bgtask"
)

// A task reports how far it has come; the latest report is on its record,
// where get_task, list_tasks and the prompt view show it.
func ExampleTask_ReportProgress() {
	ctx := context.Background()
	m, err := bgtask.New()
	if err != nil {
		log.Fatal(err)
	}
	defer m.Shutdown(ctx)
	o := m.Owner("thread-1")
	id, err := o.Spawn(ctx, func(ctx context.Context, t *bgtask.Task) (any, error) {
		for done := int64(1); done <= 3; done++ {
			if err := t.ReportProgress(done, 3, fmt.Sprintf("file %d of 3", done)); err != nil {
				return nil, err
			}
		}
		return "indexed", nil
	})
	if err != nil {
		log.Fatal(err)
	}
	rec, err := o.Wait(ctx, id)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(rec.Status, rec.Progress.Done, rec.Progress.Total, rec.Progress.Message)
	// Output: completed 3 3 file 3 of 3
}

// A spawn retried with the same idempotency key returns the task the first
// one started, and does not run the function again.
func ExampleWithIdempotencyKey() {
	ctx := context.Background()
	m, err := bgtask.New()
	if err != nil {
		log.Fatal(err)
	}
	defer m.Shutdown(ctx)
	o := m.Owner("thread-1")
	runs := 0
	build := func(ctx context.Context, t *bgtask.Task) (any, error) { runs++; return "built", nil }
	first, err := o.Spawn(ctx, build, bgtask.WithIdempotencyKey("build-42"))
	if err != nil {
		log.Fatal(err)
	}
	if _, err := o.Wait(ctx, first); err != nil {
		log.Fatal(err)
	}
	again, err := o.Spawn(ctx, build, bgtask.WithIdempotencyKey("build-42"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(again == first, runs)
	// Output: true 1
}
