package pgstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Per kind, claims serialize on a transaction-scoped advisory lock, so a
// count and the claim it admits are one step: READ COMMITTED gives each
// statement a fresh snapshot, and the lock is taken before the count, so
// the count sees every claim of the kind committed before it.
const (
	kindLockSQL    = `SELECT pg_advisory_xact_lock(hashtextextended($2 || 'kind ' || $1, 0))` // $2: the scope's lock prefix
	kindRunningSQL = `SELECT count(*) FROM bgtask_tasks WHERE status = 'running' AND resume IS NOT NULL AND (resume::jsonb)->>'kind' = $1`
)

// errNoRoom aborts a claim when its kind runs its limit already.
var errNoRoom = errors.New("pgstore: kind at its limit")

// ClaimUnder implements store.KindLimiter: in one transaction, fenced as
// Commit is, it takes the kind's advisory lock, counts the running
// records of the kind across every instance and, if fewer than limit,
// writes claim through the reducer. Two round trips, on a connection of
// its own (not grouped with other commits).
func (s *Store) ClaimUnder(ctx context.Context, claim bgtype.TaskMeta, limit int) (bool, error) {
	if claim.Resume == nil || limit <= 0 {
		return false, fmt.Errorf("%w: ClaimUnder of a record without a kind, or a limit of %d", store.ErrInvalidAction, limit)
	}
	act := store.UpsertAction(claim)
	if err := store.ValidateCommit(claim.Owner, act); err != nil {
		return false, err
	}
	if s.isClosed() {
		return false, ErrClosed
	}
	if err := s.checkFence(); err != nil {
		return false, err
	}
	r := &commitReq{ctx: ctx, owner: claim.Owner, actions: []store.Action{act}}
	r.ids, r.replace = touched(r.actions)
	reqs := []*commitReq{r}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return false, fmt.Errorf("pgstore: claim: %w", err)
	}
	defer conn.Release()
	kind := claim.Resume.Kind
	locked, err := s.lockRowsAfter(ctx, conn, reqs, func(b *pgx.Batch) func(pgx.BatchResults) error {
		b.Queue(kindLockSQL, kind, s.scope.lock)
		b.Queue(kindRunningSQL, kind)
		return func(br pgx.BatchResults) error {
			if _, err := br.Exec(); err != nil {
				return fmt.Errorf("pgstore: claim: lock kind %s: %w", kind, err)
			}
			var n int
			if err := br.QueryRow().Scan(&n); err != nil {
				return fmt.Errorf("pgstore: claim: count kind %s: %w", kind, err)
			}
			if n >= limit {
				return errNoRoom
			}
			return nil
		}
	})
	if err != nil {
		abort(ctx, conn)
		if errors.Is(err, errNoRoom) {
			return false, nil
		}
		return false, err
	}
	w, retain, err := applyAll(locked, reqs)
	if err != nil || w.empty() {
		abort(ctx, conn) // the reducer dropped it: another claim came first
		return err == nil, err
	}
	if err := s.writeRows(ctx, conn, w, retain); err != nil {
		abort(ctx, conn)
		return false, fmt.Errorf("pgstore: claim: %w", err)
	}
	s.noteWritten(w)
	return true, nil
}

var _ store.KindLimiter = (*Store)(nil)

// claimWaitingSQL reads and locks up to $2 waiting records of the kinds
// $1, oldest first, skipping the rows another transaction holds (a claim
// of another instance under way): claimers split the queue instead of
// queueing behind each other's locks. The partial index of waiting
// records serves it; the kind is read from the few rows it yields.
const claimWaitingSQL = `SELECT ` + taskCols + ` FROM bgtask_tasks
	WHERE resume IS NOT NULL AND status = 'queued' AND instance = '' AND (resume::jsonb)->>'kind' = ANY($1)
	ORDER BY created_at, id LIMIT $2 FOR UPDATE SKIP LOCKED`

// ClaimTasks implements store.KindClaimer: in one transaction, fenced as
// Commit is, it takes the advisory lock of each kind with a limit (in
// order of name, as ClaimUnder takes one) and counts its running records,
// then locks, per limited kind, as many waiting records as it has room
// for, and for the other kinds up to c.Max, skipping rows that another
// transaction holds; it writes the c.Max oldest of them as claims through
// the reducer. One round trip to lock, a second when a kind has a limit,
// and one to write.
func (s *Store) ClaimTasks(ctx context.Context, c store.Claim) ([]bgtype.TaskMeta, error) {
	if c.Instance == "" {
		return nil, fmt.Errorf("%w: ClaimTasks without an instance", store.ErrInvalidAction)
	}
	if len(c.Kinds) == 0 || c.Max <= 0 {
		return nil, nil
	}
	if s.isClosed() {
		return nil, ErrClosed
	}
	if err := s.checkFence(); err != nil {
		return nil, err
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("pgstore: claim: %w", err)
	}
	defer conn.Release()
	rows, err := s.lockWaiting(ctx, conn, c)
	if err != nil {
		abort(ctx, conn)
		return nil, err
	}
	reqs, locked := claimReqs(rows, c)
	if len(reqs) == 0 {
		abort(ctx, conn)
		return nil, nil
	}
	w, retain, err := applyAll(locked, reqs)
	if err != nil || w.empty() {
		abort(ctx, conn)
		return nil, err
	}
	if err := s.writeRows(ctx, conn, w, retain); err != nil {
		abort(ctx, conn)
		return nil, fmt.Errorf("pgstore: claim: %w", err)
	}
	s.noteWritten(w)
	out := make([]bgtype.TaskMeta, 0, len(w.updMeta))
	for _, m := range w.updMeta {
		out = append(out, stored(*m))
	}
	store.SortMetas(out)
	return out, nil
}

// lockWaiting begins the claim's transaction on conn and locks the
// waiting records it may claim: the fence, each limited kind's lock and
// count, then the records of each kind with room.
func (s *Store) lockWaiting(ctx context.Context, conn *pgxpool.Conn, c store.Claim) ([]row, error) {
	var (
		b       pgx.Batch
		limited []string
		free    []string // kinds without a limit
	)
	for k, l := range c.Kinds {
		if l > 0 {
			limited = append(limited, k)
		} else {
			free = append(free, k)
		}
	}
	slices.Sort(limited)
	b.Queue("BEGIN")
	fence := s.queueFence(&b)
	for _, k := range limited {
		b.Queue(kindLockSQL, k, s.scope.lock)
		b.Queue(kindRunningSQL, k)
	}
	if len(free) > 0 {
		b.Queue(claimWaitingSQL, free, c.Max)
	}
	var (
		rows []row
		next pgx.Batch // the limited kinds' records, once their room is known
	)
	err := s.sendLocking(ctx, conn, &b, func(br pgx.BatchResults) error {
		if _, err := br.Exec(); err != nil { // BEGIN
			return fmt.Errorf("pgstore: claim: %w", err)
		}
		if fence != nil {
			if err := fence(br); err != nil {
				return err
			}
		}
		for _, k := range limited {
			if _, err := br.Exec(); err != nil {
				return fmt.Errorf("pgstore: claim: lock kind %s: %w", k, err)
			}
			var n int
			if err := br.QueryRow().Scan(&n); err != nil {
				return fmt.Errorf("pgstore: claim: count kind %s: %w", k, err)
			}
			if room := min(c.Kinds[k]-n, c.Max); room > 0 {
				next.Queue(claimWaitingSQL, []string{k}, room)
			}
		}
		if len(free) > 0 {
			got, err := collectWaiting(br)
			if err != nil {
				return err
			}
			rows = append(rows, got...)
		}
		return nil
	})
	if err != nil || next.Len() == 0 {
		return rows, err
	}
	err = s.sendLocking(ctx, conn, &next, func(br pgx.BatchResults) error {
		for range next.Len() {
			got, err := collectWaiting(br)
			if err != nil {
				return err
			}
			rows = append(rows, got...)
		}
		return nil
	})
	return rows, err
}

// sendLocking sends b on conn and reads its results with read; the
// transaction stays open.
func (s *Store) sendLocking(ctx context.Context, conn *pgxpool.Conn, b *pgx.Batch, read func(pgx.BatchResults) error) error {
	br := conn.SendBatch(ctx, b)
	defer br.Close()
	if err := read(br); err != nil {
		return err
	}
	if err := br.Close(); err != nil {
		return fmt.Errorf("pgstore: claim: %w", err)
	}
	return nil
}

// collectWaiting reads the rows of one claimWaitingSQL. A corrupt row is
// left where it is: WaitingTasks names it.
func collectWaiting(br pgx.BatchResults) ([]row, error) {
	rs, err := br.Query()
	if err != nil {
		return nil, fmt.Errorf("pgstore: claim: %w", err)
	}
	rows, err := collect(rs)
	if err != nil && !errors.Is(err, bgtype.ErrCorrupt) {
		return nil, fmt.Errorf("pgstore: claim: %w", err)
	}
	return rows, nil
}

// claimReqs makes the claims of the c.Max oldest locked rows, one commit
// request per owner, and the rows they touch.
func claimReqs(rows []row, c store.Claim) ([]*commitReq, map[string]row) {
	slices.SortFunc(rows, func(a, b row) int {
		return cmp.Or(a.meta.CreatedAt.Compare(b.meta.CreatedAt), cmp.Compare(a.meta.ID, b.meta.ID))
	})
	rows = rows[:min(len(rows), c.Max)]
	var reqs []*commitReq
	byOwner := map[string]*commitReq{}
	locked := make(map[string]row, len(rows))
	for _, r := range rows {
		claim := r.meta
		claim.Resume = r.meta.Resume.Clone()
		claim.Status, claim.Instance, claim.Resume.ResumedAt = bgtype.StatusRunning, c.Instance, c.At
		req := byOwner[claim.Owner]
		if req == nil {
			req = &commitReq{owner: claim.Owner}
			byOwner[claim.Owner] = req
			reqs = append(reqs, req)
		}
		req.actions = append(req.actions, store.Action{Op: store.OpUpsert, Tasks: []bgtype.TaskMeta{claim}, At: c.At})
		req.ids = append(req.ids, claim.ID)
		locked[claim.ID] = r
	}
	return reqs, locked
}

var _ store.KindClaimer = (*Store)(nil)
