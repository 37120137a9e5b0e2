package bgtask

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/internal/clock"
	"github.com/bgtask/bgtask/internal/idgen"
	"github.com/bgtask/bgtask/internal/memstore"
)

// spawn validates, registers, commits the first record and starts the task.
// Registration and the closed, run and parent checks happen under m.mu, so a
// cancel or a shutdown either sees the new task or refuses it: no window.
func (m *Manager) spawn(ctx context.Context, owner string, fn Func, agent bool, opts []SpawnOption) (string, error) {
	id, _, err := m.spawnTask(ctx, owner, fn, agent, opts)
	return id, err
}

// spawnTask is spawn that also reports whether it started the task: false
// when an idempotency key (WithIdempotencyKey) made it return the id of the
// owner's task that has the key already. Its steps: the configuration
// checked (spawnConfigFor), the task made (newTask), registered under m.mu
// after any live spawn with its key (claimAndRegister), its first record
// committed (commitSpawn), then started or queued (startOrQueue).
func (m *Manager) spawnTask(ctx context.Context, owner string, fn Func, agent bool, opts []SpawnOption) (string, bool, error) {
	sc, err := m.spawnConfigFor(owner, fn, agent, opts)
	if err != nil {
		return "", false, err
	}
	t, ent, err := m.newTask(ctx, owner, fn, agent, &sc)
	if err != nil {
		return "", false, err
	}
	claim, admitted, id, err := m.claimAndRegister(ctx, t, owner, sc.key)
	if err != nil || id != "" {
		return id, false, err
	}
	if agent {
		m.bindInbox(t.rec.ID, t.agentInbox())
	}
	if id, err := m.commitSpawn(ctx, t, ent, &sc, claim, admitted); err != nil || id != "" {
		return id, false, err
	}
	m.counters.spawned.Add(1)
	if sc.waiting {
		// Its record waits in the queue: this Task never runs, a claim
		// (here or on another instance) starts its first attempt.
		m.settleClaim(t, claim, true)
		m.abandon(t)
		return t.rec.ID, true, nil
	}
	m.notifyRec("", t.rec) // safe to read: its goroutine has not started
	m.settleClaim(t, claim, true)
	m.startOrQueue(t, admitted)
	return t.rec.ID, true, nil
}

// spawnConfigFor checks a spawn's arguments and options and returns its
// configuration, with the task's type filled in.
func (m *Manager) spawnConfigFor(owner string, fn Func, agent bool, opts []SpawnOption) (spawnConfig, error) {
	var sc spawnConfig
	switch {
	case !bgtype.ValidOwner(owner):
		return sc, bgtype.ErrInvalidOwner
	case m.closed.Load():
		return sc, ErrClosed
	case fn == nil:
		return sc, errNilFunc
	}
	if len(opts) > 0 {
		sc = spawnConfigOf(opts)
	}
	if err := checkName(sc.name); err != nil {
		return sc, err
	}
	if err := m.cfg.checkTags(sc.tags); err != nil {
		return sc, err
	}
	if sc.keySet {
		if err := checkKey(sc.key); err != nil {
			return sc, err
		}
	}
	if !sc.wake.Valid() {
		return sc, invalidArgument("unknown wake policy %q", sc.wake)
	}
	if sc.typ == "" {
		sc.typ = bgtype.TypeTask
		if agent {
			sc.typ = bgtype.TypeSubAgent
		}
	}
	return sc, nil
}

// newTask makes the task a spawn registers: its lineage (checked against
// the store), its first record, its inbox if it is a sub-agent, and its
// context, with the spawner's values and the deadline.
func (m *Manager) newTask(ctx context.Context, owner string, fn Func, agent bool, sc *spawnConfig) (*Task, *memstore.Entry, error) {
	created := clock.Now()
	deadline, timeoutCause, err := sc.deadlineOf(created)
	if err != nil {
		return nil, nil, err
	}
	var parent bgtype.Parent
	if sc.adopt != nil {
		parent = sc.adopt.Parent // a claimed record keeps its lineage
	} else {
		parent = m.lineage(ctx, sc.parent)
		storedRun, err := m.checkStoredParent(ctx, owner, parent.TaskID)
		if err != nil {
			return nil, nil, err
		}
		parent.RunID = firstNonEmpty(parent.RunID, storedRun)
	}

	t, ent := m.newTaskRecord()
	t.m, t.fn = m, fn
	if sc.foreground {
		t.fg.Store(fgHeld)
	}
	u := bgtype.TaskMeta{
		ID: idgen.NewTask(created), Owner: owner, Type: sc.typ, Name: sc.name, Description: sc.description,
		Parent: parent, Detached: sc.detached, Instance: m.cfg.instance, Wake: sc.wake,
		IdempotencyKey: sc.key, // idempotent spawn (WithIdempotencyKey)
		CreatedAt:      created,
	}
	if sc.tags != nil {
		u.Tags = slices.Clone(sc.tags)
	}
	if sc.resume != nil || sc.adopt != nil {
		kindRecord(t, &u, sc, created)
	}
	t.rec.Set(&u) // the identity fields: never written again
	if agent {
		t.rareState().inbox = m.newInbox(m.forwardOrphanEvent(owner, u.ID))
	}
	if sc.foreground && sc.outputFunc != nil {
		t.rareState().outputFunc = sc.outputFunc // the buffer, made by the first write, streams to it
	}
	// The task keeps the spawner's values (trace span, logger, auth), not
	// its cancellation or deadline; taskContext hides the spawner's tool call.
	t.vals = valuesOnly{ctx}
	cctx, stop := context.WithCancelCause(&t.vals)
	if timeoutCause != nil {
		// A child of cctx: a cancel (cctx's cause) that came first stays
		// the cause; stopping cctx also stops the timer.
		dctx, release := context.WithDeadlineCause(cctx, deadline, timeoutCause)
		cancel := stop
		stop = func(cause error) { cancel(cause); release() }
		cctx = dctx
	}
	t.cctx = cctx
	t.stop = stop
	return t, ent, nil
}

// claimAndRegister registers t under m.mu, after any live spawn of this
// Manager with the same idempotency key: when that one committed, its id is
// returned (and t is dropped). It returns t's claim of key, and whether t
// was admitted (it runs: the spawner starts it after the commit).
func (m *Manager) claimAndRegister(ctx context.Context, t *Task, owner, key string) (claim *keyClaim, admitted bool, id string, err error) {
	m.mu.Lock()
	ref := keyRef{owner, key}
	for c := m.keys[ref]; key != "" && c != nil; c = m.keys[ref] {
		// A spawn of this Manager with the key is live: its task, once
		// committed, is the answer; if its commit fails, try again.
		m.mu.Unlock()
		id, err := awaitClaim(ctx, c)
		if err != nil || id != "" {
			t.stop(nil)
			return nil, false, id, err
		}
		m.mu.Lock()
	}
	err = m.register(t)
	if err == nil && key != "" {
		claim = &keyClaim{t: t, done: make(chan struct{})}
		m.keys[ref] = claim
	}
	admitted = t.phase == phaseAdmitted
	if admitted {
		// Only the spawner moves a task it admitted, so it is running
		// from now on: started after the commit without taking m.mu again.
		t.move(phaseRunning)
	}
	m.mu.Unlock()
	if err != nil {
		t.stop(nil)
		return nil, false, "", err
	}
	return claim, admitted, "", nil
}

// commitSpawn commits t's first record. On a failure it abandons t and
// returns the error, or the id of the owner's task that has the key
// already (a duplicate key is that task's answer, with no error).
func (m *Manager) commitSpawn(ctx context.Context, t *Task, ent *memstore.Entry, sc *spawnConfig, claim *keyClaim, admitted bool) (string, error) {
	t.rec.Start(admitted)
	t.queued = !admitted
	ctxDone := ctx.Err() != nil // a commit then changes nothing
	err := m.commitFirst(ctx, t, ent, sc.waiting)
	if err == nil {
		return "", nil
	}
	m.abandon(t)
	m.settleClaim(t, claim, false)
	if dup, ok := errors.AsType[*bgtype.DuplicateKeyError](err); ok && dup.Key == sc.key {
		return dup.TaskID, nil // the owner has a task with this key: that one is the answer
	}
	// It may have been committed all the same: end the record.
	m.settleFailedSpawn(t.rec.Expand(), err, ctxDone)
	if ctx.Err() != nil { // say why the caller's context ended: a cancelled run, say
		return "", fmt.Errorf("bgtask: spawn: %w", context.Cause(ctx))
	}
	return "", fmt.Errorf("bgtask: spawn: commit: %w", err)
}

// startOrQueue starts a committed task that was admitted, or that a
// released slot admitted meanwhile; a task still waiting for a slot is
// queued (a released slot starts it), one cancelled meanwhile ends
// cancelled.
func (m *Manager) startOrQueue(t *Task, admitted bool) {
	if !admitted {
		m.mu.Lock()
		switch t.phase {
		case phaseAdmitted: // a released slot admitted it meanwhile
			t.move(phaseRunning)
		case phaseWaiting:
			t.move(phaseQueued) // a released slot starts it
			m.mu.Unlock()
			return
		}
		// phaseDropped: cancelled before it had a slot; it ends cancelled
		m.mu.Unlock()
	}
	m.start(t)
}

// kindRecord makes u the first record of a resumable task: a new one
// (Kind.Spawn), or the claimed record whose next attempt runs here. Out of
// line: only a kind's spawn pays for it.
//
//go:noinline
func kindRecord(t *Task, u *bgtype.TaskMeta, sc *spawnConfig, now time.Time) {
	t.rareState().kind = true
	a := sc.adopt
	if a == nil {
		u.Resume, u.Attempt = sc.resume, 1
		return
	}
	u.ID, u.CreatedAt, u.Type, u.Name, u.Description = a.ID, a.CreatedAt, a.Type, a.Name, a.Description
	u.Detached, u.Wake, u.IdempotencyKey, u.Tags = a.Detached, a.Wake, a.IdempotencyKey, slices.Clone(a.Tags)
	u.Attempt, u.Resume, u.Progress = a.Attempt, a.Resume.Clone(), a.Progress
	if u.Resume.ResumedAt.IsZero() {
		u.Resume.ResumedAt = now
	}
}

// spawnConfigOf applies opts. Out of line: the config escapes into the
// options' closures, so only a spawn with options pays for its allocation.
//
//go:noinline
func spawnConfigOf(opts []SpawnOption) spawnConfig {
	sc := new(spawnConfig)
	for _, o := range opts {
		o(sc)
	}
	return *sc
}

// register checks what must hold at the moment the task becomes visible and
// links it into every index. Called with m.mu held.
func (m *Manager) register(t *Task) error {
	if m.closed.Load() {
		return ErrClosed
	}
	p, err := m.checkParent(t)
	if err != nil {
		return err
	}
	os := m.owners[t.rec.Owner]
	if err := m.checkLimits(t, p, os); err != nil {
		return err
	}
	if os == nil {
		os = m.spareOwner
		if os == nil {
			os = new(ownerState)
		}
	}
	if err := m.admit(t, os); err != nil {
		return err
	}
	m.link(t, p, os)
	return nil
}

// checkParent returns t's parent if this Manager runs it (nil if not),
// refusing one the owner may not see and a cancelled run; a child without
// a run of its own joins its parent's. Under m.mu.
func (m *Manager) checkParent(t *Task) (*Task, error) {
	meta := t.rec
	var p *Task
	if id := meta.Parent().TaskID; id != "" {
		p = m.nodes[id]
		if p != nil && !visibleParent(p, meta.Owner) {
			return nil, fmt.Errorf("%w: %s", errParentNotFound, id)
		}
	}
	if p != nil && meta.ParentRun() == "" {
		// A child belongs to its parent's run. The record has a parent
		// and is still private to this spawn.
		meta.SetParentRun(p.rec.ParentRun())
	}
	if run := meta.ParentRun(); run != "" {
		// The owner's run of that id is cancelled; or the parent was
		// cancelled with its run (a sub-agent's own tasks run under its id,
		// so their run key is not their parent's).
		rs := m.runs[runKey{owner: meta.Owner, run: run}]
		canceled := rs != nil && rs.canceled
		if !canceled && p != nil && p.phase.live() && p.signaled && p.rec.ParentRun() == run {
			canceled = errors.Is(context.Cause(p.cctx), errRunCanceled)
		}
		if canceled {
			return nil, fmt.Errorf("%w: %q", errRunCanceled, run)
		}
	}
	return p, nil
}

// checkLimits refuses t for a name its owner's live task has, a parent
// being cancelled, and the fan-out and depth limits; it sets t's depth.
// Under m.mu.
func (m *Manager) checkLimits(t *Task, p *Task, os *ownerState) error {
	meta := t.rec
	if meta.Name() != "" && os != nil && os.names[meta.Name()] != nil {
		return fmt.Errorf("%w: %q", ErrDuplicateName, meta.Name())
	}
	if p != nil {
		t.depth = p.depth + 1
		if !meta.Detached {
			if p.signaled && p.phase.live() {
				return fmt.Errorf("%w: %s", errParentCanceled, p.rec.ID)
			}
			if m.cfg.limits.MaxChildren > 0 && len(p.children) >= m.cfg.limits.MaxChildren {
				return fmt.Errorf("%w: task %s has %d live children", errFanOutLimit, p.rec.ID, len(p.children))
			}
		}
	} else if meta.Parent().TaskID != "" {
		t.depth = 1
	}
	if m.cfg.limits.MaxDepth > 0 && int(t.depth) > m.cfg.limits.MaxDepth {
		return fmt.Errorf("%w: depth %d > %d", errDepthLimit, t.depth, m.cfg.limits.MaxDepth)
	}
	return nil
}

// link adds an admitted t to the Manager's indexes: its owner's list and
// names, its run, its parent's children, the nodes. Nothing fails here.
// Under m.mu.
func (m *Manager) link(t *Task, p *Task, os *ownerState) {
	meta := t.rec
	if os.live == 0 { // not in m.owners: retire deleted it when live fell to 0
		m.owners[meta.Owner] = os
		if os == m.spareOwner {
			m.spareOwner = nil
		}
	}
	os.live++ // decremented by retire
	if t.reports() {
		os.reporting++ // decremented by retire, or added by toBackground
	}
	os.head = linkFront(os.head, t, ownerLinks)
	if meta.Name() != "" {
		if os.names == nil {
			os.names = make(map[string]*Task)
		}
		os.names[meta.Name()] = t
	}
	if key, ok := taskRun(meta); ok {
		rs := m.runs[key]
		if rs == nil {
			rs = &runState{}
			m.runs[key] = rs
		}
		rs.live++
		rs.head = linkFront(rs.head, t, runLinks)
	}
	if p != nil && !meta.Detached {
		t.parent = p
		if p.children == nil {
			p.children = make(map[*Task]struct{})
		}
		p.children[t] = struct{}{}
	}
	m.nodes[meta.ID] = t
	m.live++
	m.active++
	m.wg.Add(1)
}

// abandon undoes register after the first commit failed. The task never ran
// and nothing of it was stored.
func (m *Manager) abandon(t *Task) {
	m.mu.Lock()
	starts := m.unregister(t)
	m.mu.Unlock()
	m.startAll(starts)
	t.stop(nil)
	if ib := t.agentInbox(); ib != nil {
		ib.Close()
	}
	m.retire(t)
	m.wg.Done()
}

// checkStoredParent checks an explicit parent that this Manager does not run
// (it ended, or was restored): it must exist in the Store and be visible to
// owner. It returns the parent's run, which the child joins. A live parent is
// checked again under the lock by register.
func (m *Manager) checkStoredParent(ctx context.Context, owner, parentID string) (run string, err error) {
	if parentID == "" {
		return "", nil
	}
	m.mu.Lock()
	p := m.nodes[parentID]
	m.mu.Unlock()
	if p != nil {
		return "", nil
	}
	meta, err := m.store.Get(ctx, parentID)
	switch {
	case errors.Is(err, ErrNotFound):
		return "", fmt.Errorf("%w: %s", errParentNotFound, parentID)
	case err != nil:
		return "", fmt.Errorf("bgtask: spawn: parent %s: %w", parentID, err)
	case meta.Owner != owner && meta.ID != owner:
		return "", fmt.Errorf("%w: %s", errParentNotFound, parentID)
	}
	return meta.Parent.RunID, nil
}

// visibleParent reports whether a task of owner may name p as its parent:
// p has the same owner, or p is the sub-agent that is the owner.
func visibleParent(p *Task, owner string) bool {
	return p.rec.Owner == owner || p.rec.ID == owner
}

// forwardOrphanEvent is the OnClosed fallback of the inbox of the
// sub-agent agent: events of its own tasks that arrive after it ended go up
// to its owner, so they are not lost; messages sent to it that it never
// read are dropped and logged (the sender's Send reported ErrInboxClosed or
// the task ended first). A forwarded end is noted as delivered to owner, so
// the owner's boundary marks its record under the record's own owner.
func (m *Manager) forwardOrphanEvent(owner, agent string) func(bgtype.Event) {
	return func(ev bgtype.Event) {
		if ev.Kind == bgtype.EventCustom && ev.EventType == bgtype.EventTypeMessage {
			m.log.Warn("bgtask: message to an ended sub-agent dropped", "task_id", ev.TaskID)
			return
		}
		if ev.Kind.IsTerminal() && m.durable() {
			m.sent.forward(owner, agent, ev.TaskID)
		}
		_ = m.deliver(owner, ev)
	}
}

// reservedNames are names the tools use to address tasks by relation.
var reservedNames = map[string]bool{"parent": true, "self": true, "all": true, "broadcast": true}

// maxNameLen bounds a task name, which the model types back to address it.
const maxNameLen = 128

// checkName validates an optional task name.
func checkName(name string) error {
	switch {
	case name == "":
		return nil
	case reservedNames[name]:
		return invalidArgument("task name %q is reserved", name)
	case len(name) > maxNameLen:
		return invalidArgument("task name longer than %d bytes", maxNameLen)
	case strings.TrimSpace(name) != name:
		return invalidArgument("task name %q has surrounding spaces", name)
	case strings.HasPrefix(name, idgen.TaskPrefix):
		return invalidArgument("task name %q starts with the id prefix %q", name, idgen.TaskPrefix)
	case strings.IndexFunc(name, unicode.IsControl) >= 0:
		return invalidArgument("task name %q has control characters", name)
	}
	return nil
}
