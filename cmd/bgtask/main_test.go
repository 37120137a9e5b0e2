package main

import (
	"context"
	"os"
	"testing"

	"github.com/bgtask/bgtask/store/pgstore/pgtest"
	"go.uber.org/goleak"
)

// childEnv makes the test binary run the inspector instead of the tests,
// so that a test can run it as a second process.
const childEnv = "BGTASK_INSPECTOR_CHILD"

// TestMain runs the inspector when re-executed as a child, and otherwise
// the tests against a throw-away PostgreSQL server, failing the package if
// any goroutine outlives them.
func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
	}
	goleak.VerifyTestMain(pgtest.Wrap(m))
}
