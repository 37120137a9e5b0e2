package pgstore

// The statements a commit and the reaper run, for plan_test.go.
const (
	LockByIDSQL    = lockByIDSQL
	LockByOwnerSQL = lockByOwnerSQL
	RetainCountSQL = retainCountSQL
	RetainAgeSQL   = retainAgeSQL
)

// ReapTasksSQL is the reaper's task query, for plan_test.go.
var ReapTasksSQL = reapTasksSQL
