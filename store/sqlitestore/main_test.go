package sqlitestore_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any goroutine (the writer, database/sql's
// connection openers) outlives its tests.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
