// Package storetest is the conformance suite that every [bgtask.Store]
// must pass. A store's own tests call [Run] with a [Config] that says how to
// make a new, empty store; Run runs every check as a subtest:
//
//   - RoundTrip: Commit, then Get, Load, List and Children return every
//     field of [bgtask.TaskMeta] as committed (times as the same instant,
//     in UTC, at microsecond precision; results as equal JSON values);
//   - GetUnknown, LoadUnknownOwner, NoAliasing: not-found errors, empty
//     snapshots, and no shared bytes between the store and its callers;
//   - Upsert, ReplaceAll, Remove, Invariants: after each Commit the store
//     holds exactly what [bgtask.ApplyAction] computes (the reducer is the
//     oracle), and the lifecycle invariants hold;
//   - InvalidActions: an invalid action makes Commit return an error
//     matching [bgtask.ErrInvalidAction] and change nothing (all or none);
//   - ConcurrentWriters: 8 goroutines commit updates of the same tasks at
//     once; readers never see a status or attempt go back or a terminal
//     record change, and each task ends as one writer's terminal update;
//   - OwnerIsolation, List, ListEarlyBreak, Children: scoping and order;
//   - Retention (when Config.NewRetaining is set): count retention per owner;
//   - Corrupt (when Config.Corrupt is set): damaged records are errors
//     matching [bgtask.ErrCorrupt] that name the task, and nothing else is lost;
//   - CancelledContext: a cancelled context is an error matching
//     [context.Canceled], and a refused Commit changes nothing.
//
// A store in its own module uses it like this:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, storetest.Config{
//			New: func(t *testing.T) bgtask.Store {
//				s, err := sqlitestore.Open(filepath.Join(t.TempDir(), "tasks.db"))
//				if err != nil {
//					t.Fatal(err)
//				}
//				t.Cleanup(func() { s.Close() })
//				return s
//			},
//			NewRetaining: func(t *testing.T, perOwner int) bgtask.Store { … RetainPerOwner(perOwner) … },
//			Corrupt: func(t *testing.T, s bgtask.Store, id string, kind storetest.CorruptKind) {
//				// write a row that no code can read, with SQL that bypasses the store:
//				// CorruptStatus: status = 'paused'; CorruptResult: result = '{"a":'.
//			},
//		})
//	}
//
// Every check makes its own store, so New must return an empty one each
// time (a new file, schema or database). The checks run one after another;
// run the tests with -race. -short makes ConcurrentWriters shorter. The
// whole suite commits a few thousand small records.
//
// What the suite requires beyond the [bgtask.Store] doc, so that every
// store behaves alike:
//
//   - Commit of an upsert whose id is stored under another owner returns
//     nil and changes nothing (the reducer drops an update of another
//     owner; an id never moves); ReplaceAll and Remove skip such ids too.
//   - Children("") yields nothing, even though records without a parent
//     have an empty Parent.TaskID.
//   - List and Children yield an error matching context.Canceled, as the
//     last pair, when ctx is already cancelled.
//   - A record with a zero CreatedAt sorts first (as [bgtask.SortMetas]
//     does), and a nil Result stays nil while a JSON null stays null.
package storetest
