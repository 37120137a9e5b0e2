package bgtask

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/bgtask/bgtask/internal/memstore"

	"github.com/bgtask/bgtask/bgtype"
)

// cancelVia is how a test cancels: through the Manager or an Owner view.
type cancelVia struct {
	name   string
	cancel func(ctx context.Context, m *Manager, owner, id string) (int, error)
	tree   func(ctx context.Context, m *Manager, owner, id string) (int, error)
}

var cancelVias = []cancelVia{
	{"manager",
		func(ctx context.Context, m *Manager, _, id string) (int, error) { return m.Cancel(ctx, id) },
		func(ctx context.Context, m *Manager, _, id string) (int, error) { return m.CancelTree(ctx, id) }},
	{"owner",
		func(ctx context.Context, m *Manager, owner, id string) (int, error) {
			return m.Owner(owner).Cancel(ctx, id)
		},
		func(ctx context.Context, m *Manager, owner, id string) (int, error) {
			return m.Owner(owner).CancelTree(ctx, id)
		}},
}

func TestCancelOne(t *testing.T) {
	for _, via := range cancelVias {
		t.Run(via.name, func(t *testing.T) {
			m := newTestManager(t)
			o := m.Owner("thread-1")
			id, p := spawnProbe(t, t.Context(), o)
			childID, child := spawnProbe(t, t.Context(), o, WithParent(bgtype.Parent{TaskID: id}))

			if n, err := via.cancel(t.Context(), m, "thread-1", id); n != 1 || err != nil {
				t.Fatalf("first Cancel = %d, %v; want 1, nil", n, err)
			}
			if n, err := via.cancel(t.Context(), m, "thread-1", id); n != 0 || err != nil {
				t.Fatalf("second Cancel = %d, %v; want 0, nil", n, err)
			}
			if cause := <-p.cause; !errors.Is(cause, ErrCanceled) {
				t.Fatalf("cause %v, want ErrCanceled", cause)
			}
			if got := waitTask(t, o, id); got.Status != bgtype.StatusCanceled || got.Error != ErrCanceled.Error() {
				t.Fatalf("after cancel: status %q error %q", got.Status, got.Error)
			}
			// Cancel is not a tree cancel: the child goes on.
			if err := child.ctxErr(t); err != nil {
				t.Fatalf("Cancel reached the child: %v", err)
			}
			// A terminal task: 0, no error.
			if n, err := via.cancel(t.Context(), m, "thread-1", id); n != 0 || err != nil {
				t.Fatalf("Cancel of a terminal task = %d, %v; want 0, nil", n, err)
			}
			done, err := o.Spawn(t.Context(), func(context.Context, *Task) (any, error) { return true, nil })
			if err != nil {
				t.Fatal(err)
			}
			waitTask(t, o, done)
			if n, err := via.cancel(t.Context(), m, "thread-1", done); n != 0 || err != nil {
				t.Fatalf("Cancel of a completed task = %d, %v; want 0, nil", n, err)
			}
			if got, _ := o.Get(t.Context(), done); got.Status != bgtype.StatusCompleted {
				t.Fatalf("a cancel changed a completed task to %q", got.Status)
			}
			// Unknown id.
			if n, err := via.cancel(t.Context(), m, "thread-1", "task_00000000000000000000000000000000"); n != 0 || !errors.Is(err, ErrNotFound) {
				t.Fatalf("Cancel(unknown) = %d, %v; want 0, ErrNotFound", n, err)
			}
			if n, err := via.tree(t.Context(), m, "thread-1", "nonexistent"); n != 0 || !errors.Is(err, ErrNotFound) {
				t.Fatalf("CancelTree(unknown) = %d, %v; want 0, ErrNotFound", n, err)
			}
			if n, err := via.cancel(t.Context(), m, "thread-1", childID); n != 1 || err != nil {
				t.Fatalf("Cancel(child) = %d, %v", n, err)
			}
			waitTask(t, o, childID)
			shutdownManager(t, m)
		})
	}
}

func TestCancelTree(t *testing.T) {
	for _, via := range cancelVias {
		t.Run(via.name, func(t *testing.T) {
			m := newTestManager(t)
			o := m.Owner("thread-1")
			root, rp := spawnProbe(t, t.Context(), o, WithName("root-task"))
			child, cp := spawnProbe(t, t.Context(), o, WithParent(bgtype.Parent{TaskID: root}))
			grand, gp := spawnProbe(t, t.Context(), o, WithParent(bgtype.Parent{TaskID: child}))
			sibling, sp := spawnProbe(t, t.Context(), o)

			if n, err := via.tree(t.Context(), m, "thread-1", root); n != 3 || err != nil {
				t.Fatalf("CancelTree(root) = %d, %v; want 3", n, err)
			}
			if n, err := via.tree(t.Context(), m, "thread-1", root); n != 0 || err != nil {
				t.Fatalf("second CancelTree(root) = %d, %v; want 0", n, err)
			}
			for _, c := range []struct {
				name  string
				p     *probeTask
				cause error
			}{{"root", rp, ErrCanceled}, {"child", cp, errParentCanceled}, {"grandchild", gp, errParentCanceled}} {
				if got := <-c.p.cause; !errors.Is(got, c.cause) {
					t.Fatalf("%s cause %v, want %v", c.name, got, c.cause)
				}
			}
			for _, id := range []string{root, child, grand} {
				if got := waitTask(t, o, id); got.Status != bgtype.StatusCanceled {
					t.Fatalf("%s: %q, want cancelled", id, got.Status)
				}
			}
			if err := sp.ctxErr(t); err != nil {
				t.Fatalf("CancelTree reached an unrelated task: %v", err)
			}
			close(sp.release)
			waitTask(t, o, sibling)
			shutdownManager(t, m)
		})
	}
}

func TestCancelTreeFromTheMiddle(t *testing.T) {
	m := newTestManager(t)
	o := m.Owner("thread-1")
	root, rp := spawnProbe(t, t.Context(), o)
	child, cp := spawnProbe(t, t.Context(), o, WithParent(bgtype.Parent{TaskID: root}))
	grand, gp := spawnProbe(t, t.Context(), o, WithParent(bgtype.Parent{TaskID: child}))
	if n, err := o.CancelTree(t.Context(), child); n != 2 || err != nil {
		t.Fatalf("CancelTree(child) = %d, %v; want 2", n, err)
	}
	if c := <-cp.cause; !errors.Is(c, ErrCanceled) {
		t.Fatalf("child cause %v, want ErrCanceled", c)
	}
	if c := <-gp.cause; !errors.Is(c, errParentCanceled) {
		t.Fatalf("grandchild cause %v, want ErrCanceled (parent)", c)
	}
	if err := rp.ctxErr(t); err != nil {
		t.Fatalf("CancelTree(child) reached the root: %v", err)
	}
	waitTask(t, o, child)
	waitTask(t, o, grand)
	if n, err := o.CancelTree(t.Context(), root); n != 1 || err != nil {
		t.Fatalf("CancelTree(root) = %d, %v; want 1", n, err)
	}
	waitTask(t, o, root)
	shutdownManager(t, m)
}

// TestCancelDetached: a detached child is left out of CancelTree and
// CancelRun, and included in CancelAll.
func TestCancelDetached(t *testing.T) {
	for _, how := range []string{"tree", "run"} {
		t.Run(how, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m := newTestManager(t)
				o := m.Owner("thread-1")
				attached, detached := newProbe(), newProbe()
				type ids struct{ a, d string }
				out := make(chan ids, 1)
				errc := make(chan error, 1)
				root, err := o.Spawn(t.Context(), func(ctx context.Context, tk *Task) (any, error) {
					a, err1 := o.Spawn(ctx, attached.fn)
					d, err2 := o.Spawn(ctx, detached.fn, WithDetached())
					out <- ids{a, d}
					errc <- errors.Join(err1, err2)
					<-ctx.Done()
					return nil, ctx.Err()
				}, WithParent(bgtype.Parent{RunID: "run-1"}))
				if err != nil {
					t.Fatal(err)
				}
				c := <-out
				if err := <-errc; err != nil {
					t.Fatalf("nested spawns: %v", err)
				}
				dm, err := o.Get(t.Context(), c.d)
				if err != nil || !dm.Detached || dm.Parent != (bgtype.Parent{TaskID: root, RunID: "run-1"}) {
					t.Fatalf("detached record %+v, %v: want Detached with lineage kept", dm, err)
				}

				var n int
				if how == "tree" {
					n, err = o.CancelTree(t.Context(), root)
				} else {
					n, err = m.CancelRun("thread-1", "run-1")
				}
				if n != 2 || err != nil {
					t.Fatalf("cancel %s = %d, %v; want 2 (root and attached child)", how, n, err)
				}
				waitTask(t, o, root)
				waitTask(t, o, c.a)
				synctest.Wait()
				if err := detached.ctxErr(t); err != nil {
					t.Fatalf("the detached child was cancelled: %v", err)
				}
				if got, _ := o.Get(t.Context(), c.d); got.Status != bgtype.StatusRunning {
					t.Fatalf("detached child %q, want running", got.Status)
				}
				if n, err := m.Owner("thread-1").CancelAll(); n != 1 || err != nil {
					t.Fatalf("CancelAll = %d, %v; want 1 (the detached child)", n, err)
				}
				if cause := <-detached.cause; !errors.Is(cause, ErrCanceled) {
					t.Fatalf("detached cause %v, want ErrCanceled", cause)
				}
				if got := waitTask(t, o, c.d); got.Status != bgtype.StatusCanceled {
					t.Fatalf("detached child %q after CancelAll", got.Status)
				}
				shutdownManager(t, m)
			})
		})
	}
}

// TestCancelTreeEndedParent: a parent that already ended still leads
// CancelTree to its live descendants.
func TestCancelTreeEndedParent(t *testing.T) {
	m := newTestManager(t)
	o := m.Owner("thread-1")
	grand := newProbe()
	childReady := make(chan string, 1)
	child := func(ctx context.Context, tk *Task) (any, error) {
		if _, err := o.Spawn(ctx, grand.fn); err != nil {
			return nil, err
		}
		childReady <- tk.ID()
		<-ctx.Done()
		return nil, context.Cause(ctx)
	}
	childCause := make(chan error, 1)
	parent, err := o.Spawn(t.Context(), func(ctx context.Context, tk *Task) (any, error) {
		_, err := o.Spawn(ctx, func(ctx context.Context, tk *Task) (any, error) {
			v, err := child(ctx, tk)
			childCause <- context.Cause(ctx)
			return v, err
		})
		return "parent done", err
	})
	if err != nil {
		t.Fatal(err)
	}
	childID := <-childReady
	<-grand.started
	if got := waitTask(t, o, parent); got.Status != bgtype.StatusCompleted {
		t.Fatalf("parent: %+v", got)
	}
	if n, err := o.CancelTree(t.Context(), parent); n != 2 || err != nil {
		t.Fatalf("CancelTree(ended parent) = %d, %v; want 2", n, err)
	}
	if c := <-childCause; !errors.Is(c, errParentCanceled) {
		t.Fatalf("child cause %v", c)
	}
	if c := <-grand.cause; !errors.Is(c, errParentCanceled) {
		t.Fatalf("grandchild cause %v", c)
	}
	if got := waitTask(t, o, childID); got.Status != bgtype.StatusCanceled {
		t.Fatalf("child %q", got.Status)
	}
	if got := waitTask(t, o, grand.task.ID()); got.Status != bgtype.StatusCanceled {
		t.Fatalf("grandchild %q", got.Status)
	}
	if got, _ := o.Get(t.Context(), parent); got.Status != bgtype.StatusCompleted {
		t.Fatalf("the ended parent became %q", got.Status)
	}
	if n, err := o.CancelTree(t.Context(), parent); n != 0 || err != nil {
		t.Fatalf("CancelTree after all ended = %d, %v; want 0", n, err)
	}
	shutdownManager(t, m)
}

func TestOwnerCancelAll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newTestManager(t)
		a, b := m.Owner("thread-A"), m.Owner("thread-B")
		var aIDs []string
		var aProbes, bProbes []*probeTask
		for range 3 {
			id, p := spawnProbe(t, t.Context(), a)
			aIDs, aProbes = append(aIDs, id), append(aProbes, p)
		}
		var bIDs []string
		for range 2 {
			id, p := spawnProbe(t, t.Context(), b)
			bIDs, bProbes = append(bIDs, id), append(bProbes, p)
		}
		if n, err := m.Owner("thread-A").CancelAll(); n != 3 || err != nil {
			t.Fatalf("CancelAll(A) = %d, %v; want 3", n, err)
		}
		if n, err := m.Owner("thread-A").CancelAll(); n != 0 || err != nil {
			t.Fatalf("second CancelAll(A) = %d, %v; want 0", n, err)
		}
		for i, id := range aIDs {
			if c := <-aProbes[i].cause; !errors.Is(c, ErrCanceled) {
				t.Fatalf("A task cause %v", c)
			}
			if got := waitTask(t, a, id); got.Status != bgtype.StatusCanceled {
				t.Fatalf("A task %q", got.Status)
			}
		}
		synctest.Wait()
		for _, p := range bProbes {
			if err := p.ctxErr(t); err != nil {
				t.Fatalf("CancelAll(A) reached B: %v", err)
			}
		}
		if got := listTasks(t, b, bgtype.StatusRunning); len(got) != 2 {
			t.Fatalf("B running: %v", taskIDs(got))
		}
		if n, err := m.Owner("nobody").CancelAll(); n != 0 || err != nil {
			t.Fatalf("CancelAll(nobody) = %d, %v", n, err)
		}
		for _, bad := range []string{"", "  "} {
			if _, err := m.Owner(bad).CancelAll(); !errors.Is(err, bgtype.ErrInvalidOwner) {
				t.Fatalf("Owner(%q).CancelAll = %v, want ErrInvalidArgument (blank owner)", bad, err)
			}
		}
		if n, err := b.CancelAll(); n != 2 || err != nil {
			t.Fatalf("B.CancelAll = %d, %v; want 2", n, err)
		}
		for _, id := range bIDs {
			if got := waitTask(t, b, id); got.Status != bgtype.StatusCanceled {
				t.Fatalf("B task %q", got.Status)
			}
		}
		if got := listTasks(t, b, bgtype.StatusRunning, bgtype.StatusQueued); len(got) != 0 {
			t.Fatalf("B still has %v", taskIDs(got))
		}
		shutdownManager(t, m)
	})
}

func TestCancelRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newTestManager(t)
		o, other := m.Owner("thread-1"), m.Owner("thread-2")
		a, ap := spawnProbe(t, t.Context(), o, WithParent(bgtype.Parent{RunID: "run-1"}))
		b, bp := spawnProbe(t, WithToolCall(t.Context(), ToolCall{RunID: "run-1", CallID: "call-1"}), o)
		// A child of a run task, named without the run id: it joins its parent's run.
		c, cp := spawnProbe(t, t.Context(), o, WithParent(bgtype.Parent{TaskID: a}))
		// Another owner's task in its own run of the same id: untouched.
		e, ep := spawnProbe(t, t.Context(), other, WithParent(bgtype.Parent{RunID: "run-1"}))
		// Another run.
		d, dp := spawnProbe(t, t.Context(), o, WithParent(bgtype.Parent{RunID: "run-2"}))

		if got, _ := o.Get(t.Context(), c); got.Parent.RunID != "run-1" {
			t.Fatalf("child's run %q, want run-1 (its parent's)", got.Parent.RunID)
		}
		if n, err := o.CancelRun("run-1"); n != 3 || err != nil {
			t.Fatalf("CancelRun(run-1) = %d, %v; want 3", n, err)
		}
		if n, err := m.CancelRun("thread-1", "run-1"); n != 0 || err != nil {
			t.Fatalf("second CancelRun(run-1) = %d, %v; want 0", n, err)
		}
		for _, p := range []*probeTask{ap, bp, cp} {
			if cause := <-p.cause; !errors.Is(cause, errRunCanceled) {
				t.Fatalf("cause %v, want ErrCanceled (run)", cause)
			}
		}
		for _, x := range []struct {
			o  Owner
			id string
		}{{o, a}, {o, b}, {o, c}} {
			if got := waitTask(t, x.o, x.id); got.Status != bgtype.StatusCanceled || got.Error != errRunCanceled.Error() {
				t.Fatalf("%s: %q %q, want cancelled by the run", x.id, got.Status, got.Error)
			}
		}
		synctest.Wait()
		if err := dp.ctxErr(t); err != nil {
			t.Fatalf("CancelRun(run-1) reached run-2: %v", err)
		}
		if err := ep.ctxErr(t); err != nil {
			t.Fatalf("thread-1's CancelRun(run-1) reached thread-2's run-1: %v", err)
		}
		// thread-2 still spawns into its run-1.
		if _, err := other.Spawn(WithToolCall(t.Context(), ToolCall{RunID: "run-1"}), func(context.Context, *Task) (any, error) { return nil, nil }); err != nil {
			t.Fatalf("thread-2's spawn into its run-1: %v", err)
		}
		// Later spawns into the run are refused, however the run is named,
		// after its tasks all ended.
		if _, err := o.Spawn(WithToolCall(t.Context(), ToolCall{RunID: "run-1"}), newProbe().fn); !errors.Is(err, errRunCanceled) {
			t.Fatalf("spawn into the cancelled run by tool call: %v, want ErrCanceled (run)", err)
		}
		if _, err := o.Spawn(t.Context(), newProbe().fn, WithParent(bgtype.Parent{RunID: "run-1"})); !errors.Is(err, errRunCanceled) {
			t.Fatalf("spawn into the cancelled run by parent: %v, want ErrCanceled (run)", err)
		}
		if got := len(listTasks(t, o)); got != 4 {
			t.Fatalf("thread-1 has %d tasks, want 4", got)
		}
		// A run that never had tasks.
		if n, err := m.CancelRun("thread-1", "run-empty"); n != 0 || err != nil {
			t.Fatalf("CancelRun(run-empty) = %d, %v", n, err)
		}
		if _, err := o.Spawn(t.Context(), newProbe().fn, WithParent(bgtype.Parent{RunID: "run-empty"})); !errors.Is(err, errRunCanceled) {
			t.Fatalf("spawn into run-empty: %v", err)
		}
		if _, err := m.CancelRun("thread-1", ""); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("CancelRun(\"\") = %v, want ErrInvalidArgument", err)
		}
		// Run-2 still accepts spawns.
		if id, err := o.Spawn(t.Context(), func(context.Context, *Task) (any, error) { return nil, nil }, WithParent(bgtype.Parent{RunID: "run-2"})); err != nil {
			t.Fatalf("spawn into run-2: %v", err)
		} else {
			waitTask(t, o, id)
		}
		close(dp.release)
		waitTask(t, o, d)
		close(ep.release)
		if got := waitTask(t, other, e); got.Status != bgtype.StatusCompleted {
			t.Fatalf("thread-2's run-1 task %s, want completed", got.Status)
		}
		shutdownManager(t, m)
	})
}

// TestCancelRunNestedSpawnRace is awaken test 12: a task of the run spawns
// after the run was cancelled; its nested spawn inherits the run and fails.
// A sub-agent's own tasks run under its id, not its owner's: their spawn
// fails the same way, since the sub-agent was cancelled with the run.
func TestCancelRunNestedSpawnRace(t *testing.T) {
	for _, subAgent := range []bool{false, true} {
		t.Run(fmt.Sprint("subAgent=", subAgent), func(t *testing.T) {
			m := newTestManager(t)
			o := m.Owner("thread-1")
			started, gate := make(chan struct{}), make(chan struct{})
			nested := make(chan error, 1)
			var ran atomic.Bool
			spawn := o.Spawn
			if subAgent {
				spawn = o.SpawnAgent
			}
			root, err := spawn(t.Context(), func(ctx context.Context, tk *Task) (any, error) {
				close(started)
				<-gate
				spawner := o
				if subAgent {
					var err error
					if spawner, err = tk.Agent(); err != nil {
						return nil, err
					}
				}
				_, err := spawner.Spawn(ctx, func(context.Context, *Task) (any, error) { ran.Store(true); return nil, nil })
				nested <- err
				return nil, err
			}, WithParent(bgtype.Parent{RunID: "run-cancelled"}))
			if err != nil {
				t.Fatal(err)
			}
			<-started
			if n, err := m.CancelRun("thread-1", "run-cancelled"); n != 1 || err != nil {
				t.Fatalf("CancelRun = %d, %v; want 1", n, err)
			}
			close(gate)
			if err, want := <-nested, `bgtask: run cancelled: "run-cancelled"`; !errors.Is(err, errRunCanceled) || err.Error() != want {
				t.Fatalf("nested spawn: %v, want %s", err, want)
			}
			if got := waitTask(t, o, root); got.Status != bgtype.StatusCanceled {
				t.Fatalf("root %q (%q), want cancelled", got.Status, got.Error)
			}
			if got := listTasks(t, o); len(got) != 1 {
				t.Fatalf("List has %d tasks, want 1", len(got))
			}
			shutdownManager(t, m)
			if ran.Load() {
				t.Fatal("the refused nested task ran")
			}
		})
	}
}

// TestCancelParentSignalledRefusesAttachedChild: once a parent was asked to
// stop, a new attached child of it is refused; a detached one is allowed.
func TestCancelParentSignaledRefusesAttachedChild(t *testing.T) {
	m := newTestManager(t)
	o := m.Owner("thread-1")
	started, gate := make(chan struct{}), make(chan struct{})
	type res struct {
		attached, explicit, detached error
		detachedID                   string
	}
	out := make(chan res, 1)
	detached := newProbe()
	parent, err := o.Spawn(t.Context(), func(ctx context.Context, tk *Task) (any, error) {
		close(started)
		<-gate // the cancel arrives while the parent is still working
		var r res
		_, r.attached = o.Spawn(ctx, func(context.Context, *Task) (any, error) { return nil, nil })
		_, r.explicit = o.Spawn(context.Background(), func(context.Context, *Task) (any, error) { return nil, nil },
			WithParent(bgtype.Parent{TaskID: tk.ID()}))
		// ctx is cancelled and Spawn commits with it: keep its values
		// (the lineage) without its cancellation.
		r.detachedID, r.detached = o.Spawn(context.WithoutCancel(ctx), detached.fn, WithDetached())
		out <- r
		return nil, context.Cause(ctx)
	})
	if err != nil {
		t.Fatal(err)
	}
	<-started
	if n, err := o.Cancel(t.Context(), parent); n != 1 || err != nil {
		t.Fatalf("Cancel = %d, %v", n, err)
	}
	// From outside too, while the parent is still live.
	if _, err := o.Spawn(t.Context(), newProbe().fn, WithParent(bgtype.Parent{TaskID: parent})); !errors.Is(err, errParentCanceled) {
		t.Fatalf("outside spawn under the cancelled parent: %v, want ErrCanceled (parent)", err)
	}
	close(gate)
	r := <-out
	if !errors.Is(r.attached, errParentCanceled) {
		t.Fatalf("ambient attached child: %v, want ErrCanceled (parent)", r.attached)
	}
	if !errors.Is(r.explicit, errParentCanceled) {
		t.Fatalf("explicit attached child: %v, want ErrCanceled (parent)", r.explicit)
	}
	if r.detached != nil {
		t.Fatalf("detached child: %v, want allowed", r.detached)
	}
	if got := waitTask(t, o, parent); got.Status != bgtype.StatusCanceled {
		t.Fatalf("parent %q", got.Status)
	}
	if ids := taskIDs(listTasks(t, o)); len(ids) != 2 {
		t.Fatalf("List = %v, want the parent and the detached child", ids)
	}
	if err := detached.ctxErr(t); err != nil {
		t.Fatalf("detached child cancelled: %v", err)
	}
	if got, _ := o.Get(t.Context(), r.detachedID); got.Parent.TaskID != parent || !got.Detached {
		t.Fatalf("detached child record %+v", got)
	}
	close(detached.release)
	waitTask(t, o, r.detachedID)
	shutdownManager(t, m)
}

// TestCancelTreeRacesChildSpawns: a parent keeps spawning attached children
// while its tree is cancelled. Every spawn either is refused or yields a child
// that the cascade reaches: no child escapes.
func TestCancelTreeRacesChildSpawns(t *testing.T) {
	for range 20 {
		// The loop may spawn thousands of children: keep all their records.
		m := newTestManager(t, WithStore(memstore.New(memstore.WithRetainPerOwner(1<<20))))
		o := m.Owner("thread-1")
		type out struct {
			ids []string
			err error
		}
		res := make(chan out, 1)
		started := make(chan struct{})
		parent, err := o.Spawn(t.Context(), func(ctx context.Context, tk *Task) (any, error) {
			var r out
			for i := 0; ; i++ {
				if i == 3 {
					close(started)
				}
				// Without the cancellation, so the commit succeeds and the
				// registration check is what decides.
				id, err := o.Spawn(context.WithoutCancel(ctx), func(ctx context.Context, tk *Task) (any, error) {
					<-ctx.Done()
					return nil, context.Cause(ctx)
				})
				if err != nil {
					r.err = err
					break
				}
				r.ids = append(r.ids, id)
			}
			res <- r
			return nil, context.Cause(ctx)
		})
		if err != nil {
			t.Fatal(err)
		}
		<-started
		n, err := o.CancelTree(t.Context(), parent)
		if err != nil {
			t.Fatal(err)
		}
		r := <-res
		if !errors.Is(r.err, errParentCanceled) {
			t.Fatalf("the spawn loop ended with %v, want ErrCanceled (parent)", r.err)
		}
		if n != len(r.ids)+1 {
			t.Fatalf("CancelTree = %d, want %d (parent and %d children)", n, len(r.ids)+1, len(r.ids))
		}
		for _, id := range r.ids {
			if got := waitTask(t, o, id); got.Status != bgtype.StatusCanceled || got.Error != errParentCanceled.Error() {
				t.Fatalf("child %s: %q %q, want cancelled by the parent", id, got.Status, got.Error)
			}
		}
		waitTask(t, o, parent)
		shutdownManager(t, m)
	}
}

// TestCancelAllDuringEmits is awaken test 99: tasks emitting in a loop are
// all cancelled at once; each ends with one cancelled event after its
// heartbeats.
func TestCancelAllDuringEmits(t *testing.T) {
	m := newTestManager(t)
	o := m.Owner("thread-1")
	ib, err := o.Inbox()
	if err != nil {
		t.Fatal(err)
	}
	const n = 5
	ids := map[string]bool{}
	for i := range n {
		id, err := o.Spawn(t.Context(), func(ctx context.Context, tk *Task) (any, error) {
			for beat := 0; ctx.Err() == nil; beat++ {
				if err := tk.Emit("heartbeat", []int{i, beat}); err != nil {
					return nil, err
				}
			}
			return nil, ctx.Err()
		}, WithWake(bgtype.WakeOnActivity))
		if err != nil {
			t.Fatal(err)
		}
		ids[id] = true
	}
	var evs []bgtype.Event
	beating := map[string]bool{}
	for len(beating) < n {
		if err := ib.Wait(t.Context()); err != nil {
			t.Fatal(err)
		}
		for _, ev := range ib.AppendDrain(nil) {
			beating[ev.TaskID] = true
			evs = append(evs, ev)
		}
	}
	if c, err := o.CancelAll(); c != n || err != nil {
		t.Fatalf("CancelAll = %d, %v; want %d", c, err, n)
	}
	for id := range ids {
		if got := waitTask(t, o, id); got.Status != bgtype.StatusCanceled {
			t.Fatalf("%s: %q", id, got.Status)
		}
	}
	evs = ib.AppendDrain(evs)
	ended := map[string]bool{}
	for _, ev := range evs {
		if !ids[ev.TaskID] {
			t.Fatalf("event of unknown task %+v", ev)
		}
		if ended[ev.TaskID] {
			t.Fatalf("event %+v after its task's terminal event", ev)
		}
		switch ev.Kind {
		case bgtype.EventCustom:
		case bgtype.EventCanceled:
			ended[ev.TaskID] = true
		default:
			t.Fatalf("unexpected event %+v", ev)
		}
	}
	if len(ended) != n {
		t.Fatalf("%d cancelled events, want %d", len(ended), n)
	}
	if got := listTasks(t, o, bgtype.StatusRunning); len(got) != 0 {
		t.Fatalf("still running: %v", taskIDs(got))
	}
	shutdownManager(t, m)
}
