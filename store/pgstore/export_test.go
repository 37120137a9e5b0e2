package pgstore

import (
	"sync/atomic"
	"time"
)

// The statements a commit and the reaper run, for plan_test.go.
const (
	LockByIDSQL    = lockByIDSQL
	LockByOwnerSQL = lockByOwnerSQL
	RetainCountSQL = retainCountSQL
	RetainAgeSQL   = retainAgeSQL
	ListTaggedSQL  = listTaggedSQL
)

// MigrationSQL is the statement that moves the schema from version v-1 to v.
func MigrationSQL(v int) string { return migrations[v-1] }

// ReapTasksSQL is the reaper's task query, for plan_test.go.
var ReapTasksSQL = reapTasksSQL

// FakeClock replaces s's clock with one that stands still until the
// returned function moves it on by d. Call it before Start.
func FakeClock(s *Store) (advance func(d time.Duration)) {
	var offset atomic.Int64
	s.clock = func() time.Time { return s.base.Add(time.Duration(offset.Load())) }
	return func(d time.Duration) { offset.Add(int64(d)) }
}
