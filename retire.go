package bgtask

// unregister removes t from every index but its owner's count (see
// retire): it is no longer live, its name is free and its slot released.
// It returns the queued tasks to start. An ended task with live attached
// children stays in m.nodes so that CancelTree still reaches them. Called
// with m.mu held.
func (m *Manager) unregister(t *Task) (starts []*Task) {
	if !t.phase.live() {
		return nil
	}
	held, queued := t.phase.holdsSlot(), t.phase == phaseWaiting || t.phase == phaseQueued
	t.move(phaseEnding)
	m.live--
	meta := t.rec
	os := m.owners[meta.Owner]
	os.head = unlink(os.head, t, ownerLinks)
	if t.reports() { // the owner links are free now: keep it on the ending list
		os.ending = linkFront(os.ending, t, ownerLinks)
		os.endingN++
	}
	if name := meta.Name(); name != "" && os.names[name] == t {
		delete(os.names, name)
	}
	m.releaseKey(t)
	if queued {
		m.dequeue(t)
	}
	if held {
		starts = m.release(os, nil)
	}
	if key, ok := taskRun(meta); ok {
		rs := m.runs[key]
		rs.live--
		rs.head = unlink(rs.head, t, runLinks)
		if rs.live == 0 {
			m.retireRun(key, rs)
		}
	}
	return starts
}

// retire is the last step of a task's end, after its events were
// delivered, in one critical section. When the owner has no task left its
// state goes, and so does its inbox if closed: until then the owner's inbox
// stays bound, so a closed inbox's fallback sees every late event instead of
// a fresh inbox. Then the task leaves the lineage index, its waiters are
// released (seeing all of this done) and it no longer counts for Shutdown.
// The caller's m.wg.Done follows.
func (m *Manager) retire(t *Task) {
	m.mu.Lock()
	m.retireLocked(t)
	m.mu.Unlock()
}

// retireLocked is retire with m.mu held.
func (m *Manager) retireLocked(t *Task) {
	owner := t.rec.Owner
	os := m.owners[owner]
	if t.reports() {
		os.reporting--
		os.ending = unlink(os.ending, t, ownerLinks) // unregister put it there
		os.endingN--
	}
	if os.live--; os.live == 0 {
		delete(m.owners, owner)
		m.owners = shrunk(m.owners, &m.deletes.owners)
		names := os.names // empty now: every name was freed by unregister
		*os = ownerState{names: names}
		m.spareOwner = os          // the next owner to start a task takes it
		m.forgetClosedInbox(owner) // m.mu, then inboxMu: the lock order (task.go)
	}
	t.move(phaseGone)
	if r := t.rare.Load(); r != nil && r.done != nil {
		close(r.done)
	}
	m.pruneNode(t)
	m.active--
	m.checkIdle()
}

// reporting reports whether a task of owner will still put its terminal
// event in the inbox for the caller to drain: it is not silent, and either
// it is live (its event comes after it unregisters) or it is ending and its
// event is not among those the caller has drained (seen, by task id). The
// ids in seen of tasks that have retired are forgotten, so seen stays small.
func (m *Manager) reporting(owner string, seen map[string]struct{}) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	os := m.owners[owner]
	if os == nil {
		clear(seen)
		return false
	}
	pending := os.reporting > os.endingN // a live task's event is yet to come
	kept := 0
	for t := os.ending; t != nil; t = t.ownerNext {
		if _, drained := seen[t.rec.ID]; drained {
			kept++
		} else {
			pending = true
		}
	}
	if kept < len(seen) { // forget the ids of tasks that have retired
		for id := range seen {
			if !os.isEnding(id) {
				delete(seen, id)
			}
		}
	}
	return pending
}

// isEnding reports whether task id is on the ending list.
func (os *ownerState) isEnding(id string) bool {
	for t := os.ending; t != nil; t = t.ownerNext {
		if t.rec.ID == id {
			return true
		}
	}
	return false
}

// pruneNode drops finished nodes without children, walking up the lineage.
func (m *Manager) pruneNode(t *Task) {
	for t != nil && t.phase == phaseGone && len(t.children) == 0 {
		delete(m.nodes, t.rec.ID)
		m.nodes = shrunk(m.nodes, &m.deletes.nodes)
		p := t.parent
		if p != nil {
			delete(p.children, t)
			t.parent = nil
		}
		t = p
	}
}

// retireRun forgets a run without live tasks, unless it was cancelled: a
// cancelled run is remembered (up to Tuning.CanceledRunsKept of them) so late
// spawns into it are refused. Called with m.mu held.
func (m *Manager) retireRun(key runKey, rs *runState) {
	if !rs.canceled {
		delete(m.runs, key)
		m.runs = shrunk(m.runs, &m.deletes.runs)
		return
	}
	m.deadRuns.Push(key)
	for m.deadRuns.Len() > m.cfg.tuning.CanceledRunsKept {
		old := m.deadRuns.Pop()
		if rs := m.runs[old]; rs != nil && rs.live == 0 {
			delete(m.runs, old)
		}
	}
}

// checkIdle closes m.idle once shutdown began and no task is active. Called
// with m.mu held.
func (m *Manager) checkIdle() {
	if m.closed.Load() && m.active == 0 && m.helpers == 0 && !m.idleShut {
		m.idleShut = true
		close(m.idle)
	}
}
