package sqlitestore_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/store/sqlitestore"
)

// A Manager keeps its task metadata in a SQLite file. After a restart, a
// new Manager on the same file finds the finished task's record, and
// Restore interrupts whatever the previous process left running.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "bgtask-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "tasks.db")

	st, err := sqlitestore.Open(ctx, path)
	if err != nil {
		log.Fatal(err)
	}
	m, err := bgtask.New(bgtask.WithStore(st))
	if err != nil {
		log.Fatal(err)
	}
	agent := m.Owner("thread-1")
	id, err := agent.Spawn(ctx, func(ctx context.Context, t *bgtask.Task) (any, error) {
		return map[string]string{"summary": "three sources agree"}, nil
	}, bgtask.WithName("research"))
	if err != nil {
		log.Fatal(err)
	}
	meta, err := agent.Wait(ctx, id)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(meta.Name, meta.Status, string(meta.Result))
	if err := m.Shutdown(ctx); err != nil {
		log.Fatal(err)
	}
	if err := st.Close(); err != nil { // after the Manager's Shutdown
		log.Fatal(err)
	}

	// The next process.
	st, err = sqlitestore.Open(ctx, path)
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	m, err = bgtask.New(bgtask.WithStore(st))
	if err != nil {
		log.Fatal(err)
	}
	defer m.Shutdown(ctx)
	interrupted, err := m.Restore(ctx, "thread-1")
	if err != nil {
		log.Fatal(err)
	}
	meta, err = m.Owner("thread-1").Get(ctx, id)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(meta.Name, meta.Status, len(interrupted), "interrupted")
	// Output:
	// research completed {"summary":"three sources agree"}
	// research completed 0 interrupted
}
