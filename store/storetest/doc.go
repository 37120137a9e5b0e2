// Package storetest is the conformance suite that every [store.Store]
// must pass. A store's own tests call [Run] with a [Config] that says how to
// make a new, empty store; Run runs every check as a subtest:
//
//   - RoundTrip: Commit, then Get, Load, List and Children return every
//     field of [bgtype.TaskMeta] as committed (times as the same instant,
//     in UTC, at microsecond precision; results as equal JSON values);
//   - GetUnknown, LoadUnknownOwner, NoAliasing: not-found errors, empty
//     snapshots, and no shared bytes between the store and its callers;
//   - Upsert, ReplaceAll, Remove, Invariants: after each Commit the store
//     holds exactly what [store.Apply] computes (the reducer is the
//     oracle), and the lifecycle invariants hold;
//   - InvalidActions, BlankOwner: an invalid action makes Commit return an
//     error matching [store.ErrInvalidAction], and an empty or blank owner
//     one matching [bgtype.ErrInvalidOwner]; either way Commit changes
//     nothing (all or none);
//   - ConcurrentWriters: 8 goroutines commit updates of the same tasks at
//     once, each reading the task back after each commit; no reader sees
//     less than any reader saw before its commit began (a status or attempt
//     going back, a terminal record changing, StartedAt stamped twice), and
//     each task ends as one writer's terminal update, unmixed;
//   - OwnerIsolation, List, ListEarlyBreak, Children: scoping and order,
//     and a range over List or Children that stops early leaks nothing;
//   - Retention (when Config.NewRetaining is set): count retention per owner;
//   - Corrupt (when Config.Corrupt is set): damaged records are errors
//     matching [bgtype.ErrCorrupt] that name the task, and nothing else is lost;
//   - KindLimiter (a [store.KindLimiter] only): concurrent ClaimUnder
//     calls of a kind admit exactly the limit; other kinds and closures
//     take no slot, an ended record frees its slot, and a claim of an
//     ended record or of one claimed first changes nothing;
//   - KindClaimer (a [store.KindClaimer] only): concurrent ClaimTasks of
//     four instances claim each waiting record once, a limited kind up to
//     its limit across them all, each as stored, oldest first; other
//     kinds, closures and ended records stay where they are;
//   - CancelledContext: a cancelled context is an error matching
//     [context.Canceled], and a refused Commit changes nothing.
//
// A store in its own module uses it like this:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, storetest.Config{
//			New: func(t *testing.T) store.Store {
//				s, err := sqlitestore.Open(filepath.Join(t.TempDir(), "tasks.db"))
//				if err != nil {
//					t.Fatal(err)
//				}
//				t.Cleanup(func() { s.Close() })
//				return s
//			},
//			NewRetaining: func(t *testing.T, perOwner int) store.Store { … WithRetainPerOwner(perOwner) … },
//			Corrupt: func(t *testing.T, s store.Store, id string, kind storetest.CorruptKind) {
//				// write a row that no code can read, with SQL that bypasses the store:
//				// CorruptStatus: status = 'paused'; CorruptResult: result = '{"a":'.
//			},
//		})
//	}
//
// Every check makes its own store, so New must return an empty one each
// time (a new file, schema or database). The checks run one after another;
// run the tests with -race. -short makes ConcurrentWriters shorter. The
// whole suite makes about 750 small commits. A failure names
// the check, the step and every field that differs.
//
// What the suite requires beyond the [store.Store] doc, so that every
// store behaves alike:
//
//   - Commit of an upsert whose id is stored under another owner returns
//     nil and changes nothing (the reducer drops an update of another
//     owner; an id never moves); ReplaceAll and Remove skip such ids too.
//   - Children("") yields nothing, even though records without a parent
//     have an empty Parent.TaskID.
//   - Load returns a non-nil Tasks map, even for an owner without tasks.
//   - Commit for an empty or blank owner returns an error matching
//     [bgtype.ErrInvalidOwner], as the in-memory store does.
//   - List and Children yield an error matching context.Canceled, as the
//     last pair, when ctx is already cancelled.
//   - A record with a zero CreatedAt sorts first (as [store.SortMetas]
//     does), and a nil Result stays nil while a JSON null stays null.
package storetest
