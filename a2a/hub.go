package bga2a

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/bgtask/bgtask/bgtype"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/bgtask/bgtask"
)

// maxQueued is how many events a follower may leave unread before it is
// dropped (it then reads the task's record instead), so a client that does
// not read its stream cannot make the server hold events without bound.
const maxQueued = 1024

// Why a follower was dropped, as a client sees it: server errors.
var (
	errClosed = fmt.Errorf("%w: %w", a2a.ErrServerError, ErrClosed)
	errBehind = fmt.Errorf("%w: the client fell more than %d events behind the task", a2a.ErrServerError, maxQueued)
	errEnded  = fmt.Errorf("%w: the owner's events ended (the Manager shut down, or another reader took the inbox)", a2a.ErrServerError)
)

// hub reads each owner's inbox, while that owner has a task started here
// that has not ended or a request that follows a task, and hands each task's
// events to the requests that follow it. One pump goroutine per such owner;
// Close stops them and waits for them.
type hub struct {
	m    *bgtask.Manager
	ctx  context.Context // cancelled by close
	stop context.CancelFunc
	wg   sync.WaitGroup
	// ended, if set, is called with each terminal event of a task, after
	// the event is handed to its followers.
	ended func(id string, completed bool, result json.RawMessage)

	startMu sync.Mutex // protects stopped; taken last, around wg.Add
	stopped bool

	mu     sync.Mutex // protects owners and closed
	owners map[string]*pump
	closed bool
}

// pump is one owner's reader. Its lock is held while events are handed out,
// and by a spawn from before the spawn to the registration of its follower,
// so that no event of a new task is handed out before someone follows it.
type pump struct {
	owner string

	mu      sync.Mutex // protects the fields below
	subs    map[string]map[*follower]struct{}
	nsubs   int
	live    map[string]struct{} // tasks started here whose end was not seen yet
	running bool                // a goroutine reads the inbox
	dead    bool                // removed from hub.owners: a registrant must take a new pump
	kick    context.CancelFunc  // ends the goroutine's current Wait
}

// follower receives one task's events, in order, in an unbounded queue
// that it reads at its own pace (up to maxQueued).
type follower struct {
	p      *pump
	taskID string
	q      *bgtask.Inbox
	reason error // why it was dropped; written before q is closed
}

func newHub(m *bgtask.Manager) *hub {
	ctx, stop := context.WithCancel(context.Background())
	return &hub{m: m, ctx: ctx, stop: stop, owners: make(map[string]*pump)}
}

// lock returns the owner's pump, locked. The caller registers followers or
// live tasks, then calls p.unlock.
func (h *hub) lock(owner string) (*pump, error) {
	for {
		h.mu.Lock()
		if h.closed {
			h.mu.Unlock()
			return nil, errClosed
		}
		p := h.owners[owner]
		if p == nil {
			p = &pump{owner: owner, subs: make(map[string]map[*follower]struct{}), live: make(map[string]struct{})}
			h.owners[owner] = p
		}
		h.mu.Unlock()
		p.mu.Lock()
		if !p.dead {
			return p, nil
		}
		p.mu.Unlock()
	}
}

// follow registers a follower of taskID. p.mu is held.
func (p *pump) follow(taskID string) *follower {
	f := &follower{p: p, taskID: taskID, q: bgtask.NewInbox(bgtask.InboxConfig{HighWater: -1})}
	set := p.subs[taskID]
	if set == nil {
		set = make(map[*follower]struct{})
		p.subs[taskID] = set
	}
	set[f] = struct{}{}
	p.nsubs++
	return f
}

// unlock starts the pump's goroutine if it has something to do and none
// runs, and releases p.mu. An error (the hub closed) means no goroutine will
// hand events out: the caller drops the followers it registered.
func (h *hub) unlock(p *pump) error {
	defer p.mu.Unlock()
	if p.running || (p.nsubs == 0 && len(p.live) == 0) {
		return nil
	}
	ib, err := h.m.Inbox(p.owner)
	if err != nil {
		return err
	}
	h.startMu.Lock()
	defer h.startMu.Unlock()
	if h.stopped {
		return errClosed
	}
	p.running = true
	h.wg.Add(1)
	go h.run(p, ib)
	return nil
}

// stopFollowing removes f; the pump's goroutine ends if nothing is left
// to do.
func (f *follower) stopFollowing() {
	p := f.p
	p.mu.Lock()
	p.drop(f, nil)
	if p.nsubs == 0 && len(p.live) == 0 && p.kick != nil {
		p.kick()
	}
	p.mu.Unlock()
}

// drop removes f and closes its queue, saying why. p.mu is held.
func (p *pump) drop(f *follower, reason error) {
	set := p.subs[f.taskID]
	if _, ok := set[f]; !ok {
		return
	}
	delete(set, f)
	if len(set) == 0 {
		delete(p.subs, f.taskID)
	}
	p.nsubs--
	f.reason = reason
	f.q.Close()
}

// run reads the owner's inbox until the owner has neither followers nor live
// tasks, the inbox ends (the Manager shut down), or the hub closes.
func (h *hub) run(p *pump, ib *bgtask.Inbox) {
	defer h.wg.Done()
	for {
		p.mu.Lock()
		if p.nsubs == 0 && len(p.live) == 0 {
			p.running = false
			p.mu.Unlock()
			h.retire(p)
			return
		}
		ctx, cancel := context.WithCancel(h.ctx)
		p.kick = cancel
		p.mu.Unlock()

		err := ib.Wait(ctx)
		kicked := ctx.Err() != nil && h.ctx.Err() == nil
		cancel()
		evs := ib.Drain()

		p.mu.Lock()
		p.kick = nil
		for _, ev := range evs {
			p.dispatch(ev)
			if ev.Kind.IsTerminal() && h.ended != nil {
				h.ended(ev.TaskID, ev.Kind == bgtype.EventCompleted, ev.Result)
			}
		}
		if err != nil && !kicked && len(evs) == 0 {
			// The hub closed, or the inbox ended: the followers read the
			// records instead.
			reason := errEnded
			if h.ctx.Err() != nil {
				reason = errClosed
			}
			for _, set := range p.subs {
				for f := range set {
					p.drop(f, reason)
				}
			}
			clear(p.live)
			p.running = false
			p.mu.Unlock()
			h.retire(p)
			return
		}
		p.mu.Unlock()
	}
}

// dispatch hands ev to the followers of its task. p.mu is held.
func (p *pump) dispatch(ev bgtype.Event) {
	for f := range p.subs[ev.TaskID] {
		if f.q.Len() >= maxQueued {
			p.drop(f, errBehind)
			continue
		}
		_ = f.q.Send(ev)
	}
	if ev.Kind.IsTerminal() {
		delete(p.live, ev.TaskID)
	}
}

// retire forgets an idle pump, unless a registrant revived it meanwhile.
func (h *hub) retire(p *pump) {
	h.mu.Lock()
	p.mu.Lock()
	if !p.running {
		p.dead = true
		if h.owners[p.owner] == p {
			delete(h.owners, p.owner)
		}
	}
	p.mu.Unlock()
	h.mu.Unlock()
}

// close stops every pump and waits for them; followers read the records.
func (h *hub) close() {
	h.mu.Lock()
	h.closed = true
	h.mu.Unlock()
	h.startMu.Lock()
	h.stopped = true
	h.startMu.Unlock()
	h.stop()
	h.wg.Wait()
}

// next returns the follower's next events, waiting for them. A nil slice
// with an error means no event will come: ctx's error, or why the follower
// was dropped (the server closed, the owner's events ended, the follower
// fell too far behind).
func (f *follower) next(ctx context.Context) ([]bgtype.Event, error) {
	for {
		err := f.q.Wait(ctx)
		if evs := f.q.Drain(); len(evs) > 0 {
			return evs, nil
		}
		switch {
		case errors.Is(err, bgtask.ErrInboxClosed) && f.reason != nil:
			return nil, f.reason
		case err != nil:
			return nil, err
		}
	}
}
