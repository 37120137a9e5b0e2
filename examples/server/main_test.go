package main

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" { // a server process started by a test
		os.Exit(serverMain(os.Args[1:], os.Stderr))
	}
	goleak.VerifyTestMain(m)
}
