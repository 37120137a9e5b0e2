package storetest

import (
	"testing"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"
)

// Config tells Run how to make the store under test. The zero value is not
// usable: New is required.
type Config struct {
	// New returns a new, empty store. Required. It registers the store's
	// cleanup with t.Cleanup. The store must not forget records during a
	// check: keep at least 100 terminal records per owner, and disable age
	// retention or count it from the commit (the suite's timestamps are
	// fixed dates in the past).
	New func(t *testing.T) store.Store
	// NewRetaining returns a new, empty store keeping at most perOwner
	// terminal records per owner (count retention; the record that became
	// terminal first goes first), applied by the commit that makes a record
	// terminal. Optional: when nil, the Retention check is skipped and
	// every other check still runs. Every real store must set it.
	NewRetaining func(t *testing.T, perOwner int) store.Store
	// Corrupt damages the stored form of task id in store s (made by New) so
	// that reading it must fail: kind is CorruptStatus (a status the code
	// does not know) or CorruptResult (broken JSON in the result). Optional:
	// when nil, the Corrupt checks are skipped (the memory store keeps typed
	// records, which cannot be corrupt). Every store that serialises records
	// must set it.
	Corrupt func(t *testing.T, s store.Store, id string, kind CorruptKind)
	// Stale puts records into store s (made by New) as runtime instances
	// that are now gone left them (each record names its instance), so
	// that s does not take them for records of a live instance of its own:
	// for example through a second connection, or by marking their
	// instances stopped. Optional: when nil, or when the store is not a
	// store.OrphanInterrupter, the InterruptOrphaned check is skipped. Every store that
	// implements store.OrphanInterrupter must set it.
	Stale func(t *testing.T, s store.Store, records ...bgtype.TaskMeta)
}

// CorruptKind says how Config.Corrupt damages a stored record.
type CorruptKind int

const (
	// CorruptStatus stores a status that no code knows, such as "paused".
	CorruptStatus CorruptKind = iota + 1
	// CorruptResult stores a result that is not valid JSON, such as `{"a":`.
	CorruptResult
)

// String returns "status" or "result".
func (k CorruptKind) String() string {
	switch k {
	case CorruptStatus:
		return "status"
	case CorruptResult:
		return "result"
	}
	return "unknown"
}

// check is one conformance check, run as a subtest.
type check struct {
	name string
	run  func(t *testing.T, c Config)
}

// checks lists every check in the order Run runs them.
var checks = []check{
	{"RoundTrip", testRoundTrip},
	{"GetUnknown", testGetUnknown},
	{"LoadUnknownOwner", testLoadUnknownOwner},
	{"NoAliasing", testNoAliasing},
	{"Upsert", testUpsert},
	{"ReplaceAll", testReplaceAll},
	{"Remove", testRemove},
	{"Announce", testAnnounce},
	{"InvalidActions", testInvalidActions},
	{"BlankOwner", testBlankOwner},
	{"Invariants", testInvariants},
	{"ReducerRules", testReducerRules},
	{"ConcurrentWriters", testConcurrentWriters},
	{"OwnerIsolation", testOwnerIsolation},
	{"List", testList},
	{"ListEarlyBreak", testListEarlyBreak},
	{"Tags", testTags},
	{"Progress", testProgress},
	{"IdempotencyKeys", testIdempotencyKeys},
	{"Resume", testResume},
	{"KindLimiter", testKindLimiter},
	{"KindClaimer", testKindClaimer},
	{"Children", testChildren},
	{"Retention", testRetention},
	{"Corrupt", testCorrupt},
	{"Recover", testRecover},
	{"InstanceLiveness", testInstanceLiveness},
	{"CancelledContext", testCanceledContext},
	{"UndeliveredOwners", testUndeliveredOwners},
	{"ManagerShutdown", testManagerShutdown},
	{"ManagerStop", testManagerStop},
}

// Run runs every check as a subtest of t, each on a new store made by
// c.New (or c.NewRetaining). Checks run one after another; only
// ConcurrentWriters uses the store from several goroutines at once, and it
// waits for them before it returns. Run fails t at once when c.New is nil.
func Run(t *testing.T, c Config) {
	t.Helper()
	if c.New == nil {
		t.Fatal("storetest: Config.New is nil")
	}
	for _, ch := range checks {
		t.Run(ch.name, func(t *testing.T) { ch.run(t, c) })
	}
}
