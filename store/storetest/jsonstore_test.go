package storetest_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/internal/memstore"
	"github.com/bgtask/bgtask/store"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/store/storetest"
)

// jsonStore is a second, independent Store for the suite's own tests: it
// keeps each record as JSON, as a database store keeps a row, so it can be
// corrupted; and each flaw turns off one thing a store must do, so the
// tests can show which check catches it.
type jsonStore struct {
	flaws    flaws
	perOwner int // count retention; 0 keeps every record

	claimMu  sync.Mutex // ClaimUnder's count and write, one claim at a time
	mu       sync.Mutex
	rows     map[string]row      // by task id
	terminal map[string][]string // per owner (or "" with flaws.globalRetention), ids in the order they ended
}

// row is a record as a database keeps it: indexed columns, the rest as
// JSON, and the result in a column of its own.
type row struct {
	owner, parent string
	raw, result   []byte
}

// flaws are the ways a jsonStore can be broken.
type flaws struct {
	gap             bool // Commit reads, lets others run, then writes: lost updates
	lastWriteWins   bool // upserts bypass the reducer
	notAtomic       bool // Commit applies the actions before an invalid one
	moveID          bool // an upsert of another owner's id takes it over
	skipCorrupt     bool // Load and List leave out records they cannot decode
	globalRetention bool // the retention count spans owners
	childrenOfEmpty bool // Children("") yields the records without a parent
	localTime       bool // times come back in a zone other than UTC
	ignoreCtx       bool // a cancelled context is not an error
	unsorted        bool // List yields newest first
	terminalFrozen  bool // every upsert of a terminal record is dropped
	ignoreAt        bool // the actions' commit time is not passed to the reducer
	noKeys          bool // idempotency keys are not enforced
	noAnnounce      bool // Announce is dropped
	deadInstances   bool // InstanceAlive reports every instance gone
	localCap        bool // ClaimUnder counts the claiming instance's records only
	claimOverwrites bool // ClaimUnder writes its claim past the reducer
}

func newJSONStore(f flaws, perOwner int) *jsonStore {
	return &jsonStore{flaws: f, perOwner: perOwner, rows: map[string]row{}, terminal: map[string][]string{}}
}

func (s *jsonStore) ctxErr(ctx context.Context) error {
	if s.flaws.ignoreCtx {
		return nil
	}
	return ctx.Err()
}

// decode reads a row with bgtask's own decoder, which names the task in
// its ErrCorrupt error.
func (s *jsonStore) decode(r row) (bgtype.TaskMeta, error) {
	var m bgtype.TaskMeta
	if err := json.Unmarshal(r.raw, &m); err != nil {
		return bgtype.TaskMeta{}, err
	}
	if r.result != nil {
		if !json.Valid(r.result) {
			return bgtype.TaskMeta{}, fmt.Errorf("%w: task %s: result is not valid JSON", bgtype.ErrCorrupt, m.ID)
		}
		m.Result = bytes.Clone(r.result)
	}
	if s.flaws.localTime {
		zone := time.FixedZone("UTC+1", 3600)
		m.CreatedAt, m.StartedAt, m.FinishedAt = m.CreatedAt.In(zone), m.StartedAt.In(zone), m.FinishedAt.In(zone)
	}
	return m, nil
}

func (s *jsonStore) Get(ctx context.Context, id string) (bgtype.TaskMeta, error) {
	if err := s.ctxErr(ctx); err != nil {
		return bgtype.TaskMeta{}, err
	}
	s.mu.Lock()
	r, ok := s.rows[id]
	s.mu.Unlock()
	if !ok {
		return bgtype.TaskMeta{}, fmt.Errorf("%w: %s", bgtask.ErrNotFound, id)
	}
	return s.decode(r)
}

// owned decodes the owner's records, or those whose parent is id when owner
// is "". It sorts them oldest first.
func (s *jsonStore) owned(owner, parent string) ([]bgtype.TaskMeta, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []bgtype.TaskMeta
	var errs []error // the corrupt records: every good one is still returned
	for _, r := range s.rows {
		if owner != "" && r.owner != owner ||
			owner == "" && (r.parent != parent || parent == "" && !s.flaws.childrenOfEmpty) {
			continue
		}
		m, err := s.decode(r)
		if err != nil {
			if !s.flaws.skipCorrupt {
				errs = append(errs, err)
			}
			continue
		}
		out = append(out, m)
	}
	store.SortMetas(out)
	if s.flaws.unsorted {
		slices.Reverse(out)
	}
	return out, errors.Join(errs...)
}

func (s *jsonStore) Load(ctx context.Context, owner string) (store.Snapshot, error) {
	if err := s.ctxErr(ctx); err != nil {
		return store.Snapshot{}, err
	}
	snap := store.Snapshot{Tasks: map[string]bgtype.TaskMeta{}}
	if owner == "" {
		return snap, nil
	}
	ms, err := s.owned(owner, "")
	for _, m := range ms {
		snap.Tasks[m.ID] = m
	}
	return snap, err
}

func (s *jsonStore) List(ctx context.Context, owner string, statuses ...bgtype.Status) iter.Seq2[bgtype.TaskMeta, error] {
	return func(yield func(bgtype.TaskMeta, error) bool) {
		for _, st := range statuses {
			if !st.Valid() {
				yield(bgtype.TaskMeta{}, fmt.Errorf("%w: %q", bgtype.ErrInvalidStatus, st))
				return
			}
		}
		if err := s.ctxErr(ctx); err != nil {
			yield(bgtype.TaskMeta{}, err)
			return
		}
		var ms []bgtype.TaskMeta
		var err error
		if owner != "" {
			ms, err = s.owned(owner, "")
		}
		for _, m := range ms {
			if len(statuses) == 0 || slices.Contains(statuses, m.Status) {
				if !yield(m, nil) {
					return
				}
			}
		}
		if err != nil {
			yield(bgtype.TaskMeta{}, err) // after every good record
		}
	}
}

func (s *jsonStore) Children(ctx context.Context, id string) iter.Seq2[bgtype.TaskMeta, error] {
	return func(yield func(bgtype.TaskMeta, error) bool) {
		if err := s.ctxErr(ctx); err != nil {
			yield(bgtype.TaskMeta{}, err)
			return
		}
		ms, err := s.owned("", id)
		if err != nil {
			yield(bgtype.TaskMeta{}, err)
			return
		}
		for _, m := range ms {
			if !yield(m, nil) {
				return
			}
		}
	}
}

// InstanceAlive knows alive the instances of its live records: it is one
// process's store, and whoever wrote a live record through it runs.
func (s *jsonStore) InstanceAlive(ctx context.Context, instance string) (bool, error) {
	if err := s.ctxErr(ctx); err != nil {
		return false, err
	}
	if s.flaws.deadInstances || instance == "" {
		return false, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.rows {
		if m, err := s.decode(r); err == nil && m.Instance == instance && !m.Status.IsTerminal() {
			return true, nil
		}
	}
	return false, nil
}

// Commit validates with a scratch MemoryStore (bgtask exports no
// validator), then reduces the owner's snapshot with store.Apply.
func (s *jsonStore) Commit(ctx context.Context, owner string, actions ...store.Action) error {
	if err := s.ctxErr(ctx); err != nil {
		return err
	}
	if s.flaws.notAtomic {
		for _, a := range actions {
			if err := s.commit(owner, a); err != nil {
				return err
			}
		}
		return s.commit(owner) // validates the owner
	}
	return s.commit(owner, actions...)
}

func (s *jsonStore) commit(owner string, actions ...store.Action) error {
	if err := memstore.New().Commit(context.Background(), owner, actions...); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	before := store.Snapshot{Tasks: map[string]bgtype.TaskMeta{}}
	for id, r := range s.rows {
		if r.owner == owner {
			m, err := s.decode(r)
			if err != nil {
				return err
			}
			before.Tasks[id] = m
		}
	}
	if s.flaws.gap {
		s.mu.Unlock()
		runtime.Gosched()
		s.mu.Lock()
	}
	after := store.Snapshot{Tasks: maps(before.Tasks)}
	for _, a := range actions {
		a.Tasks = slices.DeleteFunc(slices.Clone(a.Tasks), func(m bgtype.TaskMeta) bool {
			r, ok := s.rows[m.ID]
			return ok && r.owner != owner && !s.flaws.moveID
		})
		if s.flaws.ignoreAt {
			a.At = time.Time{}
		}
		if s.flaws.noAnnounce && a.Op == store.OpAnnounce {
			continue
		}
		if s.flaws.terminalFrozen && a.Op == store.OpUpsert && len(a.Tasks) == 1 && after.Tasks[a.Tasks[0].ID].Status.IsTerminal() {
			continue
		}
		if s.flaws.lastWriteWins && a.Op == store.OpUpsert && len(a.Tasks) == 1 {
			after.Tasks[a.Tasks[0].ID] = a.Tasks[0]
			continue
		}
		store.Apply(&after, a)
	}
	if err := s.checkKeys(before, after); err != nil {
		return err
	}
	for id := range before.Tasks {
		if _, ok := after.Tasks[id]; !ok {
			delete(s.rows, id)
		}
	}
	var ended []bgtype.TaskMeta
	for id, m := range after.Tasks {
		result := m.Result
		m.Result = nil
		raw, err := json.Marshal(m)
		if err != nil {
			return err
		}
		s.rows[id] = row{owner: owner, parent: m.Parent.TaskID, raw: raw, result: bytes.Clone(result)}
		if m.Status.IsTerminal() && !before.Tasks[id].Status.IsTerminal() {
			ended = append(ended, m)
		}
	}
	slices.SortFunc(ended, func(a, b bgtype.TaskMeta) int { return cmp.Compare(a.ID, b.ID) })
	s.retain(owner, ended)
	return nil
}

// checkKeys refuses a commit that gives a new record an idempotency key
// that another record of the owner has, as a unique index would.
func (s *jsonStore) checkKeys(before, after store.Snapshot) error {
	if s.flaws.noKeys {
		return nil
	}
	keys := map[string]string{}
	for id, m := range after.Tasks {
		if _, old := before.Tasks[id]; old && m.IdempotencyKey != "" {
			keys[m.IdempotencyKey] = id
		}
	}
	for _, id := range slices.Sorted(mapKeys(after.Tasks)) {
		m := after.Tasks[id]
		if _, old := before.Tasks[id]; old || m.IdempotencyKey == "" {
			continue
		}
		if other, ok := keys[m.IdempotencyKey]; ok {
			return &bgtype.DuplicateKeyError{Key: m.IdempotencyKey, TaskID: other}
		}
		keys[m.IdempotencyKey] = id
	}
	return nil
}

func mapKeys(m map[string]bgtype.TaskMeta) iter.Seq[string] {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// retain queues the records that ended and forgets the oldest terminal
// ones beyond the count.
func (s *jsonStore) retain(owner string, ended []bgtype.TaskMeta) {
	if s.perOwner == 0 {
		return
	}
	key := owner
	if s.flaws.globalRetention {
		key = ""
	}
	q := s.terminal[key]
	for _, m := range ended {
		q = append(q, m.ID)
	}
	q = slices.DeleteFunc(q, func(id string) bool { _, ok := s.rows[id]; return !ok })
	for len(q) > s.perOwner {
		delete(s.rows, q[0])
		q = q[1:]
	}
	s.terminal[key] = q
}

func maps(m map[string]bgtype.TaskMeta) map[string]bgtype.TaskMeta {
	out := make(map[string]bgtype.TaskMeta, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// corrupt damages the row of id as storetest.Config.Corrupt asks.
func (s *jsonStore) corrupt(t *testing.T, id string, kind storetest.CorruptKind) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.rows[id]
	if !ok {
		t.Fatalf("corrupt: no row %s", id)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(r.raw, &fields); err != nil {
		t.Fatal(err)
	}
	switch kind {
	case storetest.CorruptStatus:
		fields["status"] = json.RawMessage(`"paused"`)
	case storetest.CorruptResult:
		r.result = []byte(`{"a":`)
	}
	raw, err := json.Marshal(fields)
	if err != nil {
		t.Fatal(err)
	}
	r.raw = raw
	s.rows[id] = r
}

// jsonConfig is the suite's Config for a jsonStore with flaws f.
func jsonConfig(f flaws) storetest.Config {
	return storetest.Config{
		New: func(*testing.T) store.Store { return newJSONStore(f, 0) },
		NewRetaining: func(_ *testing.T, perOwner int) store.Store {
			return newJSONStore(f, perOwner)
		},
		Corrupt: func(t *testing.T, s store.Store, id string, kind storetest.CorruptKind) {
			s.(*jsonStore).corrupt(t, id, kind)
		},
	}
}

// WaitingTasks implements store.KindQueue: the waiting records of every
// owner, oldest first.
func (s *jsonStore) WaitingTasks(ctx context.Context, limit int) ([]bgtype.TaskMeta, error) {
	if err := s.ctxErr(ctx); err != nil {
		return nil, err
	}
	s.mu.Lock()
	var out []bgtype.TaskMeta
	var bad error
	for _, r := range s.rows {
		m, err := s.decode(r)
		switch {
		case err != nil:
			bad = errors.Join(bad, err)
		case store.Waiting(&m):
			out = append(out, m)
		}
	}
	s.mu.Unlock()
	store.SortMetas(out)
	return out[:min(limit, len(out))], bad
}

// ClaimUnder implements store.KindLimiter: under the store's lock it
// counts the running records of the claim's kind and commits the claim
// below the limit.
func (s *jsonStore) ClaimUnder(ctx context.Context, claim bgtype.TaskMeta, limit int) (bool, error) {
	if claim.Resume == nil || limit <= 0 {
		return false, fmt.Errorf("%w: ClaimUnder of a record without a kind, or a limit of %d", store.ErrInvalidAction, limit)
	}
	if err := s.ctxErr(ctx); err != nil {
		return false, err
	}
	s.claimMu.Lock() // one claim at a time: the count and the write are one step
	defer s.claimMu.Unlock()
	s.mu.Lock()
	running := 0
	for _, r := range s.rows {
		m, err := s.decode(r)
		if err == nil && m.Status == bgtype.StatusRunning && m.Resume != nil && m.Resume.Kind == claim.Resume.Kind &&
			(!s.flaws.localCap || m.Instance == claim.Instance) {
			running++
		}
	}
	s.mu.Unlock()
	if running >= limit {
		return false, nil
	}
	if s.flaws.claimOverwrites {
		s.mu.Lock()
		defer s.mu.Unlock()
		result := claim.Result
		claim.Result = nil
		raw, err := json.Marshal(claim)
		if err != nil {
			return false, err
		}
		s.rows[claim.ID] = row{owner: claim.Owner, parent: claim.Parent.TaskID, raw: raw, result: bytes.Clone(result)}
		return true, nil
	}
	return true, s.commit(claim.Owner, store.UpsertAction(claim))
}

// ClaimTasks implements store.KindClaimer: under the claim lock, the
// c.Max oldest waiting records of c.Kinds, a limited kind's only while
// fewer than its limit run, each committed through the reducer.
func (s *jsonStore) ClaimTasks(ctx context.Context, c store.Claim) ([]bgtype.TaskMeta, error) {
	if c.Instance == "" {
		return nil, fmt.Errorf("%w: ClaimTasks without an instance", store.ErrInvalidAction)
	}
	if err := s.ctxErr(ctx); err != nil {
		return nil, err
	}
	s.claimMu.Lock()
	defer s.claimMu.Unlock()
	s.mu.Lock()
	running := map[string]int{}
	var waiting []bgtype.TaskMeta
	for _, r := range s.rows {
		m, err := s.decode(r)
		switch {
		case err != nil || m.Resume == nil:
		case m.Status == bgtype.StatusRunning && (!s.flaws.localCap || m.Instance == c.Instance):
			running[m.Resume.Kind]++
		case store.Waiting(&m):
			if _, ok := c.Kinds[m.Resume.Kind]; ok {
				waiting = append(waiting, m)
			}
		}
	}
	s.mu.Unlock()
	store.SortMetas(waiting)
	var out []bgtype.TaskMeta
	for _, m := range waiting {
		if len(out) == c.Max {
			break
		}
		k := m.Resume.Kind
		if l := c.Kinds[k]; l > 0 && running[k] >= l {
			continue
		}
		running[k]++
		claim := m
		claim.Resume = m.Resume.Clone()
		claim.Status, claim.Instance, claim.Resume.ResumedAt = bgtype.StatusRunning, c.Instance, c.At
		if err := s.commit(claim.Owner, store.Action{Op: store.OpUpsert, Tasks: []bgtype.TaskMeta{claim}, At: c.At}); err != nil {
			return out, err
		}
		got, err := s.Get(ctx, claim.ID)
		if err != nil {
			return out, err
		}
		out = append(out, got)
	}
	return out, nil
}
