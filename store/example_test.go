package store_test

import (
	"fmt"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"
)

// The reducer keeps the lifecycle invariants: a terminal record is final.
func ExampleApply() {
	var snap store.Snapshot
	running := bgtype.TaskMeta{ID: "task_a", Owner: "thread-1", Status: bgtype.StatusRunning}
	store.Apply(&snap, store.UpsertAction(running))
	fmt.Println(snap.Tasks["task_a"].Status)

	done := running
	done.Status, done.Result = bgtype.StatusCompleted, []byte(`"ok"`)
	store.Apply(&snap, store.UpsertAction(done))
	fmt.Println(snap.Tasks["task_a"].Status, string(snap.Tasks["task_a"].Result))

	late := running
	late.Status, late.Error = bgtype.StatusFailed, "too late"
	store.Apply(&snap, store.UpsertAction(late)) // dropped whole
	fmt.Printf("%s %q\n", snap.Tasks["task_a"].Status, snap.Tasks["task_a"].Error)

	store.Apply(&snap, store.RemoveAction("task_a"))
	fmt.Println(len(snap.Tasks))
	// Output:
	// running
	// completed "ok"
	// completed ""
	// 0
}
