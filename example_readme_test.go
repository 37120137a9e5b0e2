package bgtask_test

import (
	"context"
	"fmt"
	"log"

	"github.com/bgtask/bgtask/bgtype"

	"github.com/bgtask/bgtask"
)

// The README's first snippet is this function's body, word for word
// (TestReadmeSnippetsAreExamples checks it), so it compiles and does what its
// comments say.
func Example_readme() {
	ctx := context.Background()
	m, err := bgtask.New() // in-memory store by default
	if err != nil {
		log.Fatal(err)
	}
	defer m.Shutdown(ctx) // cancels what is left and waits for every goroutine

	owner := m.Owner("thread-1") // everything below is scoped to this owner
	id, err := owner.Spawn(ctx, func(ctx context.Context, t *bgtask.Task) (any, error) {
		t.Emit("progress", map[string]int{"percent": 50})
		return map[string]any{"answer": 42}, nil // completed, with this JSON result
	}, bgtask.WithName("research"),
		bgtask.WithWake(bgtype.WakeOnActivity)) // progress wakes the owner too (default: the end only)
	if err != nil {
		log.Fatal(err)
	}

	inbox, _ := owner.Inbox()
	for done := false; !done; { // an agent loop does this at each step boundary
		if err := inbox.Wait(ctx); err != nil {
			log.Fatal(err)
		}
		for _, ev := range inbox.Drain() {
			fmt.Println(ev.Kind, ev.Name, string(ev.Payload)+string(ev.Result)) // json.Marshal(ev): the model's view
			done = done || (ev.TaskID == id && ev.Kind.IsTerminal())
		}
	}
	// Output:
	// custom research {"percent":50}
	// completed research {"answer":42}
}
