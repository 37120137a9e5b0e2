package storetest_test

import (
	"testing"

	"github.com/bgtask/bgtask/store"
	"github.com/bgtask/bgtask/store/storetest"
)

// open returns a new, empty store: here the suite's own JSON store (a
// second implementation); a store author opens theirs.
func open(t *testing.T) store.Store { return jsonConfig(flaws{}).New(t) }

// TestConformance is the README's "For store authors": a store passes the
// suite with one test.
func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Config{New: func(t *testing.T) store.Store { return open(t) }})
}
