package bgtask

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/bgtask/bgtask/internal/memstore"

	"github.com/bgtask/bgtask/bgtype"
)

func TestManagerSpawnRefused(t *testing.T) {
	type setupFn func(t *testing.T, m *Manager) (o Owner, ctx context.Context, opts []SpawnOption)
	plain := func(owner string, opts ...SpawnOption) setupFn {
		return func(t *testing.T, m *Manager) (Owner, context.Context, []SpawnOption) {
			return m.Owner(owner), t.Context(), opts
		}
	}
	cases := []struct {
		name  string
		setup setupFn
		nilFn bool
		want  error
	}{
		{name: "empty owner", setup: plain(""), want: bgtype.ErrInvalidOwner},
		{name: "blank owner", setup: plain(" \t\n"), want: bgtype.ErrInvalidOwner},
		{name: "nil func", setup: plain("thread-1"), nilFn: true, want: ErrInvalidArgument},
		{name: "reserved parent", setup: plain("thread-1", WithName("parent")), want: ErrInvalidArgument},
		{name: "reserved self", setup: plain("thread-1", WithName("self")), want: ErrInvalidArgument},
		{name: "reserved all", setup: plain("thread-1", WithName("all")), want: ErrInvalidArgument},
		{name: "reserved broadcast", setup: plain("thread-1", WithName("broadcast")), want: ErrInvalidArgument},
		{name: "blank name", setup: plain("thread-1", WithName("   ")), want: ErrInvalidArgument},
		{name: "leading space", setup: plain("thread-1", WithName(" worker")), want: ErrInvalidArgument},
		{name: "trailing space", setup: plain("thread-1", WithName("worker ")), want: ErrInvalidArgument},
		{name: "id prefix", setup: plain("thread-1", WithName("task_0123")), want: ErrInvalidArgument},
		{name: "control char", setup: plain("thread-1", WithName("a\x00b")), want: ErrInvalidArgument},
		{name: "newline", setup: plain("thread-1", WithName("a\nb")), want: ErrInvalidArgument},
		{name: "too long", setup: plain("thread-1", WithName(strings.Repeat("a", 129))), want: ErrInvalidArgument},
		{name: "duplicate name", want: ErrDuplicateName,
			setup: func(t *testing.T, m *Manager) (Owner, context.Context, []SpawnOption) {
				o := m.Owner("thread-1")
				spawnProbe(t, t.Context(), o, WithName("researcher"))
				return o, t.Context(), []SpawnOption{WithName("researcher")}
			}},
		{name: "duplicate name of a sub-agent", want: ErrDuplicateName,
			setup: func(t *testing.T, m *Manager) (Owner, context.Context, []SpawnOption) {
				o := m.Owner("thread-1")
				p := newProbe()
				if _, err := o.SpawnAgent(t.Context(), p.fn, WithName("researcher")); err != nil {
					t.Fatal(err)
				}
				<-p.started
				return o, t.Context(), []SpawnOption{WithName("researcher")}
			}},
		{name: "unknown parent", setup: plain("thread-1", WithParent(bgtype.Parent{TaskID: "task_00000000000000000000000000000000"})), want: errParentNotFound},
		{name: "live parent of another owner", want: errParentNotFound,
			setup: func(t *testing.T, m *Manager) (Owner, context.Context, []SpawnOption) {
				pid, _ := spawnProbe(t, t.Context(), m.Owner("thread-2"))
				return m.Owner("thread-1"), t.Context(), []SpawnOption{WithParent(bgtype.Parent{TaskID: pid})}
			}},
		{name: "ended parent of another owner", want: errParentNotFound,
			setup: func(t *testing.T, m *Manager) (Owner, context.Context, []SpawnOption) {
				o2 := m.Owner("thread-2")
				pid, err := o2.Spawn(t.Context(), func(context.Context, *Task) (any, error) { return nil, nil })
				if err != nil {
					t.Fatal(err)
				}
				waitTask(t, o2, pid)
				return m.Owner("thread-1"), t.Context(), []SpawnOption{WithParent(bgtype.Parent{TaskID: pid})}
			}},
		{name: "cancelled run, explicit parent", want: errRunCanceled,
			setup: func(t *testing.T, m *Manager) (Owner, context.Context, []SpawnOption) {
				if n, err := m.CancelRun("thread-1", "run-cancelled"); n != 0 || err != nil {
					t.Fatalf("CancelRun = %d, %v", n, err)
				}
				return m.Owner("thread-1"), t.Context(), []SpawnOption{WithParent(bgtype.Parent{RunID: "run-cancelled"})}
			}},
		{name: "cancelled run, ambient tool call", want: errRunCanceled,
			setup: func(t *testing.T, m *Manager) (Owner, context.Context, []SpawnOption) {
				if _, err := m.CancelRun("thread-1", "run-cancelled"); err != nil {
					t.Fatal(err)
				}
				return m.Owner("thread-1"), WithToolCall(t.Context(), ToolCall{RunID: "run-cancelled", CallID: "c1"}), nil
			}},
		{name: "cancelled run, detached", want: errRunCanceled,
			setup: func(t *testing.T, m *Manager) (Owner, context.Context, []SpawnOption) {
				if _, err := m.CancelRun("thread-1", "run-cancelled"); err != nil {
					t.Fatal(err)
				}
				return m.Owner("thread-1"), t.Context(), []SpawnOption{WithParent(bgtype.Parent{RunID: "run-cancelled"}), WithDetached()}
			}},
		{name: "spawn context already cancelled", want: context.Canceled,
			setup: func(t *testing.T, m *Manager) (Owner, context.Context, []SpawnOption) {
				ctx, cancel := context.WithCancel(t.Context())
				cancel()
				return m.Owner("thread-1"), ctx, []SpawnOption{WithName("worker")}
			}},
		{name: "closed manager", want: ErrClosed,
			setup: func(t *testing.T, m *Manager) (Owner, context.Context, []SpawnOption) {
				shutdownManager(t, m)
				return m.Owner("thread-1"), t.Context(), nil
			}},
	}
	for _, tc := range cases {
		for _, agent := range []bool{false, true} {
			name := tc.name + "/Spawn"
			if agent {
				name = tc.name + "/SpawnAgent"
			}
			t.Run(name, func(t *testing.T) {
				store := &countingStore{Store: memstore.New()}
				m := newTestManager(t, WithStore(store))
				o, ctx, opts := tc.setup(t, m)
				var before []string
				if bgtype.ValidOwner(o.ID()) {
					before = taskIDs(listTasks(t, o))
				}
				commits := store.commits.Load()
				var ran atomic.Bool
				fn := Func(func(context.Context, *Task) (any, error) { ran.Store(true); return nil, nil })
				if tc.nilFn {
					fn = nil
				}
				spawn := o.Spawn
				if agent {
					spawn = o.SpawnAgent
				}
				id, err := spawn(ctx, fn, opts...)
				if !errors.Is(err, tc.want) || id != "" {
					t.Fatalf("Spawn = %q, %v; want \"\", %v", id, err, tc.want)
				}
				if got := store.commits.Load(); got != commits {
					t.Fatalf("refused spawn committed %d time(s)", got-commits)
				}
				if bgtype.ValidOwner(o.ID()) {
					if after := taskIDs(listTasks(t, o)); !slices.Equal(after, before) {
						t.Fatalf("owner's tasks %v after a refused spawn, want %v", after, before)
					}
				}
				shutdownManager(t, m)
				if ran.Load() {
					t.Fatal("the function of a refused spawn ran")
				}
			})
		}
	}
}

func TestManagerSpawnNameEdges(t *testing.T) {
	m := newTestManager(t)
	o := m.Owner("thread-1")
	for _, name := range []string{strings.Repeat("a", 128), "researcher", "Parent", "my task", "tâche", "task-1"} {
		id, err := o.Spawn(t.Context(), func(context.Context, *Task) (any, error) { return nil, nil }, WithName(name))
		if err != nil {
			t.Fatalf("Spawn(name %q): %v", name, err)
		}
		if got := waitTask(t, o, id); got.Name != name {
			t.Fatalf("name %q, want %q", got.Name, name)
		}
	}
	shutdownManager(t, m)
}

func TestManagerNameReuse(t *testing.T) {
	m := newTestManager(t)
	o1, o2 := m.Owner("thread-1"), m.Owner("thread-2")
	id1, p1 := spawnProbe(t, t.Context(), o1, WithName("researcher"))
	// Same name on another owner: allowed.
	id2, _ := spawnProbe(t, t.Context(), o2, WithName("researcher"))
	if id1 == id2 {
		t.Fatal("two tasks share an id")
	}
	if _, err := o1.Spawn(t.Context(), newProbe().fn, WithName("researcher")); !errors.Is(err, ErrDuplicateName) {
		t.Fatalf("duplicate on thread-1: %v, want ErrDuplicateName", err)
	}
	// Once the first ends, the name is free again.
	close(p1.release)
	if got := waitTask(t, o1, id1); got.Status != bgtype.StatusCompleted {
		t.Fatalf("first researcher: %+v", got)
	}
	id3, err := o1.Spawn(t.Context(), func(context.Context, *Task) (any, error) { return "again", nil }, WithName("researcher"))
	if err != nil {
		t.Fatalf("Spawn after the first ended: %v", err)
	}
	if id3 == id1 {
		t.Fatal("reused id")
	}
	if got := waitTask(t, o1, id3); got.Name != "researcher" || got.Status != bgtype.StatusCompleted {
		t.Fatalf("second researcher: %+v", got)
	}
	// Also free after a cancel ends the holder.
	id4, _ := spawnProbe(t, t.Context(), o1, WithName("writer"))
	if n, err := o1.Cancel(t.Context(), id4); n != 1 || err != nil {
		t.Fatalf("Cancel = %d, %v", n, err)
	}
	waitTask(t, o1, id4)
	if _, err := o1.Spawn(t.Context(), func(context.Context, *Task) (any, error) { return nil, nil }, WithName("writer")); err != nil {
		t.Fatalf("Spawn writer after cancel: %v", err)
	}
	shutdownManager(t, m)
}

func TestManagerConcurrentSpawnSameName(t *testing.T) {
	const n = 32
	store := &countingStore{Store: memstore.New()}
	m := newTestManager(t, WithStore(store))
	o := m.Owner("thread-1")
	var (
		wg        sync.WaitGroup
		start     = make(chan struct{})
		ids       = make([]string, n)
		errs      = make([]error, n)
		ran       atomic.Int64
		releaseFn = make(chan struct{})
	)
	for i := range n {
		wg.Go(func() {
			<-start
			ids[i], errs[i] = o.Spawn(context.Background(), func(ctx context.Context, _ *Task) (any, error) {
				ran.Add(1)
				select {
				case <-releaseFn:
				case <-ctx.Done():
				}
				return nil, nil
			}, WithName("researcher"))
		})
	}
	close(start)
	wg.Wait()
	won := ""
	for i := range n {
		switch {
		case errs[i] == nil:
			if won != "" {
				t.Fatalf("two spawns won: %s and %s", won, ids[i])
			}
			won = ids[i]
		case !errors.Is(errs[i], ErrDuplicateName) || ids[i] != "":
			t.Fatalf("spawn %d: %q, %v; want ErrDuplicateName", i, ids[i], errs[i])
		}
	}
	if won == "" {
		t.Fatal("no spawn won")
	}
	if got := taskIDs(listTasks(t, o)); !slices.Equal(got, []string{won}) {
		t.Fatalf("List = %v, want [%s]", got, won)
	}
	if c := store.commits.Load(); c != 1 {
		t.Fatalf("%d commits, want 1", c)
	}
	close(releaseFn)
	waitTask(t, o, won)
	shutdownManager(t, m)
	if r := ran.Load(); r != 1 {
		t.Fatalf("%d functions ran, want 1", r)
	}
}
