package pgstore_test

import (
	"context"
	"fmt"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/store/pgstore"
	"github.com/bgtask/bgtask/store/pgstore/pgtest"
)

func Example() {
	ctx := context.Background()
	// The test server's DSN; in production, e.g.
	// "postgres://app@db.internal:5432/app?pool_max_conns=20".
	dsn, drop, err := pgtest.Current().CreateSchema(ctx)
	if err != nil {
		panic(err)
	}
	defer drop()

	store, err := pgstore.Open(ctx, dsn, pgstore.WithGrace(30e9), pgstore.WithHeartbeatInterval(5e9))
	if err != nil {
		panic(err)
	}
	defer store.Close() // after the Manager's Shutdown (defers run last-in first-out)
	m, err := bgtask.New(bgtask.WithStore(store), bgtask.WithInstance("inst_example"))
	if err != nil {
		panic(err)
	}
	defer m.Shutdown(ctx)
	// Register the instance: heartbeat, reaper and cancel listener run
	// until store.Close.
	if err := store.Start(ctx, m.Runtime()); err != nil {
		panic(err)
	}

	id, err := m.Owner("thread-1").Spawn(ctx, func(ctx context.Context, t *bgtask.Task) (any, error) {
		return 42, nil
	})
	if err != nil {
		panic(err)
	}
	rec, err := m.Wait(ctx, id)
	if err != nil {
		panic(err)
	}
	// Any process on the same database sees the record.
	stored, err := store.Get(ctx, id)
	if err != nil {
		panic(err)
	}
	fmt.Println(rec.Status, string(stored.Result), stored.Instance)
	// Notices (tasks a reaper interrupted) are drained at each step boundary.
	notices, err := store.TakeNotices(ctx, "thread-1")
	fmt.Println(len(notices), err)
	// Output:
	// completed 42 inst_example
	// 0 <nil>
}
