package pgstore_test

import (
	"context"
	"fmt"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/store/pgstore"
	"github.com/bgtask/bgtask/store/pgstore/pgtest"
)

// The README's "Stores": an instance on PostgreSQL, registered (heartbeat,
// reaper, cancel listener), and the store closed after the Manager.
func Example_readme() {
	ctx := context.Background()
	// The test server's DSN.
	dsn, drop, err := pgtest.Current().CreateSchema(ctx)
	if err != nil {
		panic(err)
	}
	defer drop()
	instanceID := "inst_readme"

	// dsn: "postgres://app@db:5432/app?sslmode=require&pool_max_conns=20", say;
	// instanceID: one per process (never the bare host name: Start refuses a live one)
	st, err := pgstore.Open(ctx, dsn) // pool settings and search_path go in the DSN
	m, err := bgtask.New(bgtask.WithStore(st), bgtask.WithInstance(instanceID))
	err = st.Start(ctx, m.Runtime()) // heartbeat, reaper, LISTEN for cancels, polling fallback
	defer st.Close()                 // after m.Shutdown: marks the instance stopped

	if err != nil {
		panic(err)
	}
	defer m.Shutdown(ctx)
	id, err := m.Owner("thread-1").Spawn(ctx, func(context.Context, *bgtask.Task) (any, error) { return 42, nil })
	if err != nil {
		panic(err)
	}
	meta, err := m.Owner("thread-1").Wait(ctx, id)
	fmt.Println(meta.Status, string(meta.Result), meta.Instance, err)
	// Output: completed 42 inst_readme <nil>
}
