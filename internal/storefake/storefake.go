// Package storefake holds the store doubles the runtime's tests and the
// agent package's tests share: the in-memory store seen as a durable store,
// and as a shared one.
package storefake

import (
	"context"
	"fmt"
	"iter"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/internal/memstore"
	"github.com/bgtask/bgtask/store"
)

// DurableMem is an in-memory store seen through another type, so a Manager
// treats it as a store whose records outlive it; it counts the Announce
// commits and fails them while failMark is set.
type DurableMem struct {
	*memstore.Store
	Mu       sync.Mutex // guards Marks and FailMark
	Marks    [][]string // the ids of each Announce commit
	FailMark error
	Corrupt  string // a task id List reports as corrupt instead of its record
}

func (d *DurableMem) Commit(ctx context.Context, owner string, actions ...store.Action) error {
	for _, a := range actions {
		if a.Op != store.OpAnnounce {
			continue
		}
		d.Mu.Lock()
		err := d.FailMark
		if err == nil {
			d.Marks = append(d.Marks, slices.Clone(a.IDs))
		}
		d.Mu.Unlock()
		if err != nil {
			return err
		}
	}
	return d.Store.Commit(ctx, owner, actions...)
}

func (d *DurableMem) List(ctx context.Context, owner string, statuses ...bgtype.Status) iter.Seq2[bgtype.TaskMeta, error] {
	return func(yield func(bgtype.TaskMeta, error) bool) {
		var bad error
		for m, err := range d.Store.List(ctx, owner, statuses...) {
			if err == nil && m.ID == d.Corrupt {
				bad = fmt.Errorf("%w: task %s: unknown status %q", bgtype.ErrCorrupt, m.ID, "paused")
				continue
			}
			if !yield(m, err) {
				return
			}
		}
		if bad != nil {
			yield(bgtype.TaskMeta{}, bad)
		}
	}
}

// MarkCommits returns the ids of each Announce commit so far.
func (d *DurableMem) MarkCommits() [][]string {
	d.Mu.Lock()
	defer d.Mu.Unlock()
	return slices.Clone(d.Marks)
}

// Shared is an in-memory store that plays a SharedStore: it records cancel
// requests and hands out notices once.
type Shared struct {
	*memstore.Store
	Mu        sync.Mutex // guards the fields below
	Requests  []string
	Notices   map[string][]bgtype.Event
	Fail      error
	NoticeErr error
}

// RequestCancel records id ("+tree" appended for a tree, then ":" and the
// reason when there is one), or fails with Fail.
func (f *Shared) RequestCancel(ctx context.Context, id string, tree bool, reason string) error {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	if f.Fail != nil {
		return f.Fail
	}
	suffix := ""
	if tree {
		suffix = "+tree"
	}
	if reason != "" {
		suffix += ":" + reason
	}
	f.Requests = append(f.Requests, id+suffix)
	return nil
}

// TakeNotices hands out the owner's notices once, or fails with NoticeErr.
func (f *Shared) TakeNotices(ctx context.Context, owner string) ([]bgtype.Event, error) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	if f.NoticeErr != nil {
		return nil, f.NoticeErr
	}
	evs := f.Notices[owner]
	delete(f.Notices, owner)
	return evs, nil
}

// Notifying is a Shared store that is a store.ChangeNotifier: after each
// Commit it calls the registered functions with the id of every record the
// commit upserted terminal or awaiting input, unless Quiet is set (a lost
// notification). Its poll interval is Poll, an hour when zero.
type Notifying struct {
	*Shared
	Poll  time.Duration
	Quiet atomic.Bool

	fmu   sync.Mutex // guards funcs and next
	funcs map[int]func(string, string)
	next  int
}

// Commit commits, then notifies.
func (n *Notifying) Commit(ctx context.Context, owner string, actions ...store.Action) error {
	if err := n.Shared.Commit(ctx, owner, actions...); err != nil {
		return err
	}
	if n.Quiet.Load() {
		return nil
	}
	var ids, owners []string
	for _, a := range actions {
		for _, m := range a.Tasks {
			if m.Status.IsTerminal() || m.Status == bgtype.StatusAwaitingInput {
				ids, owners = append(ids, m.ID), append(owners, m.Owner)
			}
		}
	}
	n.fmu.Lock()
	defer n.fmu.Unlock()
	for _, f := range n.funcs {
		for i, id := range ids {
			f(id, owners[i])
		}
	}
	return nil
}

// OnSettled implements store.ChangeNotifier.
func (n *Notifying) OnSettled(f func(id, owner string)) (stop func()) {
	n.fmu.Lock()
	defer n.fmu.Unlock()
	if n.funcs == nil {
		n.funcs = make(map[int]func(string, string))
	}
	k := n.next
	n.next++
	n.funcs[k] = f
	return func() {
		n.fmu.Lock()
		defer n.fmu.Unlock()
		delete(n.funcs, k)
	}
}

// SettledPollInterval implements store.ChangeNotifier.
func (n *Notifying) SettledPollInterval() time.Duration {
	if n.Poll > 0 {
		return n.Poll
	}
	return time.Hour
}

// Carrier is a Shared store that carries messages (store.MessageCarrier)
// straight to To, the runtime of the instance that runs every remote task,
// or answers Gone (store.DeliveryGone with that text) when it is set.
type Carrier struct {
	*Shared
	To   store.Runtime
	Gone string
}

// SendMessage implements store.MessageCarrier.
func (c *Carrier) SendMessage(ctx context.Context, owner, id string, msg bgtype.Message) (store.Delivery, error) {
	meta, err := c.Get(ctx, id)
	switch {
	case err != nil:
		return store.Delivery{}, err
	case meta.Status.IsTerminal():
		return store.Delivery{Code: store.DeliveryEnded}, nil
	case c.Gone != "":
		return store.Delivery{Code: store.DeliveryGone, Text: c.Gone}, nil
	}
	return c.To.MessageRequested(ctx, owner, id, msg), nil
}
