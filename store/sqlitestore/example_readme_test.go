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

// The README's "Stores": a Manager on a SQLite file, its cancel listener
// started, and the store closed after the Manager.
func Example_readmeOpen() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "bgtask-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "tasks.db")

	st, err := sqlitestore.Open(ctx, path) // WAL, migrations and recovery applied on open
	m, err := bgtask.New(bgtask.WithStore(st))
	err = st.Start(ctx, m.Runtime()) // carry out `bgtask cancel` from other processes
	defer st.Close()                 // after m.Shutdown (or m.Stop)

	if err != nil {
		log.Fatal(err)
	}
	defer m.Shutdown(ctx)
	id, err := m.Owner("thread-1").Spawn(ctx, func(context.Context, *bgtask.Task) (any, error) { return 42, nil })
	if err != nil {
		log.Fatal(err)
	}
	meta, err := m.Owner("thread-1").Wait(ctx, id)
	fmt.Println(meta.Status, string(meta.Result), err)
	// Output: completed 42 <nil>
}

// The README's "Inspecting tasks": a process that lets the inspector's
// cancel requests reach its tasks starts the store's listener.
func Example_readmeStart() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "bgtask-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "tasks.db")

	st, err := sqlitestore.Open(ctx, path)
	// ...
	m, err := bgtask.New(bgtask.WithStore(st))
	// ...
	if err := st.Start(ctx, m.Runtime()); err != nil { // carry out `bgtask cancel` from other processes
		log.Fatal(err)
	}

	defer st.Close()
	defer m.Shutdown(ctx)
	fmt.Println(err)
	// Output: <nil>
}

// The README's "Waking the threads a restart left with news": the end of
// a task nobody took is waiting in the file; the next process's Manager
// calls WithOnPendingOwner for its owner.
func Example_readmePendingOwner() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "bgtask-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "tasks.db")
	first, err := sqlitestore.Open(ctx, path)
	if err != nil {
		log.Fatal(err)
	}
	m1, err := bgtask.New(bgtask.WithStore(first))
	if err != nil {
		log.Fatal(err)
	}
	id, err := m1.Owner("thread-1").Spawn(ctx, func(context.Context, *bgtask.Task) (any, error) { return "done", nil })
	if err != nil {
		log.Fatal(err)
	}
	if _, err := m1.Wait(ctx, id); err != nil { // nobody reads thread-1's events
		log.Fatal(err)
	}
	if err := m1.Shutdown(ctx); err != nil {
		log.Fatal(err)
	}
	if err := first.Close(); err != nil {
		log.Fatal(err)
	}

	// The next process.
	st, err := sqlitestore.Open(ctx, path)
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	wake := make(chan string, 1)

	m, err := bgtask.New(bgtask.WithStore(st), bgtask.WithOnPendingOwner(func(owner string) {
		wake <- owner // the host starts a run for the thread; its RunStart delivers the news
	}))

	if err != nil {
		log.Fatal(err)
	}
	defer m.Shutdown(ctx)
	fmt.Println("wake", <-wake)
	// Output: wake thread-1
}
