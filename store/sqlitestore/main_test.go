package sqlitestore_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// childEnv names the environment variable that makes the test binary a
// child process of a test (TestMain runs childMain instead of the tests);
// its value is the child's configuration, as JSON.
const childEnv = "SQLITESTORE_TEST_CHILD"

// childMain, when set (on unix), runs the test binary as a child process
// of a test that needs real processes: see childEnv.
var childMain func(config string) int

// TestMain fails the package if any goroutine (the writer, database/sql's
// connection openers) outlives its tests. Started as a test's child
// process, it runs the child instead.
func TestMain(m *testing.M) {
	if cfg := os.Getenv(childEnv); cfg != "" && childMain != nil {
		os.Exit(childMain(cfg))
	}
	goleak.VerifyTestMain(m)
}
