package bgtask

import (
	"errors"
	"testing"
)

// WithMaxDepth: a root is at depth 0, its child at 1, and so on; a spawn
// deeper than the limit is refused and leaves nothing behind.
func TestLineageMaxDepth(t *testing.T) {
	m := newTestManager(t, WithLimits(Limits{MaxDepth: 2}))
	o := m.Owner("thread-1")
	root, rp := spawnProbe(t, t.Context(), o)
	child, cp := spawnProbe(t, rp.ctx, o)
	grandchild, gp := spawnProbe(t, cp.ctx, o)
	for id, want := range map[string]string{child: root, grandchild: child} {
		if got := getTask(t, o, id).Parent.TaskID; got != want {
			t.Fatalf("parent of %s = %s, want %s", id, got, want)
		}
	}
	_, err := o.Spawn(gp.ctx, (newProbe()).fn)
	if !errors.Is(err, errDepthLimit) || err.Error() != "bgtask: lineage depth limit reached: depth 3 > 2" {
		t.Fatalf("spawn at depth 3 = %v, want ErrLimit (lineage depth) with the depths", err)
	}
	// Detached children are not cascaded but still count for depth.
	if _, err := o.Spawn(gp.ctx, (newProbe()).fn, WithDetached()); !errors.Is(err, errDepthLimit) {
		t.Fatalf("detached spawn at depth 3 = %v, want ErrLimit (lineage depth)", err)
	}
	if n := len(listTasks(t, o)); n != 3 {
		t.Fatalf("owner has %d tasks, want the 3 accepted ones", n)
	}
	if n, err := m.CancelTree(t.Context(), root); n != 3 || err != nil {
		t.Fatalf("CancelTree = %d, %v; want 3", n, err)
	}
	shutdownManager(t, m)
}

// WithMaxChildren counts live attached children of one parent: the next one
// is refused until a child ends; detached children and other parents are
// not counted.
func TestLineageMaxChildren(t *testing.T) {
	m := newTestManager(t, WithLimits(Limits{MaxChildren: 2}))
	o := m.Owner("thread-1")
	_, rp := spawnProbe(t, t.Context(), o)
	_, other := spawnProbe(t, t.Context(), o)
	first, fp := spawnProbe(t, rp.ctx, o)
	spawnProbe(t, rp.ctx, o)
	_, err := o.Spawn(rp.ctx, (newProbe()).fn)
	if !errors.Is(err, errFanOutLimit) {
		t.Fatalf("third child = %v, want ErrLimit (fan-out)", err)
	}
	if _, err := o.Spawn(rp.ctx, (newProbe()).fn, WithDetached()); err != nil {
		t.Fatalf("detached third child = %v, want accepted", err)
	}
	if _, err := o.Spawn(other.ctx, (newProbe()).fn); err != nil {
		t.Fatalf("child of another parent = %v, want accepted", err)
	}
	close(fp.release)
	waitTask(t, o, first)
	if _, err := o.Spawn(rp.ctx, (newProbe()).fn); err != nil {
		t.Fatalf("child after one ended = %v, want accepted", err)
	}
	shutdownManager(t, m)
}
