package bgtask_test

import (
	"testing"

	"github.com/bgtask/bgtask/internal/memstore"

	"github.com/bgtask/bgtask/store"

	"github.com/bgtask/bgtask/store/storetest"
)

// BenchmarkRestore10k is Restore after a crash that left 10,000 records of
// one owner running: each op interrupts all of them and delivers their
// events. Filling the store is not timed.
//
//	go test -run '^$' -bench Restore10k -benchtime 5x .
func BenchmarkRestore10k(b *testing.B) {
	storetest.BenchRestore(b, 10_000, func(b *testing.B) store.Store { return memstore.New() })
}
