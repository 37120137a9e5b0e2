package pgstore

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"
)

// messageChannel is the NOTIFY channel of messages to carry; the payload is
// the id of the instance they are addressed to. messageDoneChannel tells
// senders that a message was handled; its payload is the message row's id.
// Each is followed by the scope's suffix (scope.go).
const (
	messageChannel     = "bgtask_message"
	messageDoneChannel = "bgtask_message_done"
)

// messageBatch bounds the messages one pass of an instance hands over.
const messageBatch = 100

// withdrawn is the code of a message its sender withdrew (ctx ended before
// it was handled): no instance hands it over.
const withdrawn = "withdrawn"

// messageWaits are the senders waiting for their messages to be handled,
// by message row id.
type messageWaits struct {
	mu sync.Mutex // guards m
	m  map[int64]chan struct{}
}

func (w *messageWaits) add(seq int64) chan struct{} {
	c := make(chan struct{}, 1)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = make(map[int64]chan struct{})
	}
	w.m[seq] = c
	return c
}

func (w *messageWaits) remove(seq int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.m, seq)
}

func (w *messageWaits) notify(payload string) {
	seq, err := strconv.ParseInt(payload, 10, 64)
	if err != nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	signal(w.m[seq])
}

// sendMessageSQL records a message ($2 the sender's owner, $3 the message)
// to task $1, addressed to the instance its record names, if it is live,
// and notifies that instance ($4, the scope's message channel) when the
// transaction commits.
var sendMessageSQL = `WITH r AS (
		INSERT INTO bgtask_messages (task_id, instance, owner, message)
		SELECT id, instance, $2, $3 FROM bgtask_tasks WHERE id = $1 AND status IN ` + liveSQL + `
		RETURNING id, instance)
	SELECT id, pg_notify($4, instance) FROM r`

// SendMessage implements store.MessageCarrier: it records the message in
// bgtask_messages addressed to the instance that runs the task, notifies
// it, and waits for that instance to hand it over (see Start): woken by a
// notification on the started Store's listening connection, and reading
// the row every poll interval (WithPollInterval) in case one was lost, or
// when the Store was not started.
func (s *Store) SendMessage(ctx context.Context, owner, id string, msg bgtype.Message) (store.Delivery, error) {
	if s.isClosed() {
		return store.Delivery{}, ErrClosed
	}
	body, err := json.Marshal(msg)
	if err != nil {
		return store.Delivery{}, fmt.Errorf("pgstore: send to %s: %w", id, err)
	}
	if ctx.Err() != nil {
		return store.Delivery{}, context.Cause(ctx) // nothing recorded
	}
	// The insert runs to its end even when ctx ends meanwhile: cut off
	// after the server committed it, it would leave a message that the
	// task's instance delivers while its sender is told it was not, with
	// no row id to withdraw it by. awaitOutcome, seeing ctx ended,
	// withdraws it.
	ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.grace)
	defer cancel()
	var seq int64
	err = s.pool.QueryRow(ictx, sendMessageSQL, id, owner, body, s.scope.message).Scan(&seq, nil) // the second column is pg_notify's void
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return store.Delivery{Code: store.DeliveryEnded}, nil
	case err != nil:
		return store.Delivery{}, fmt.Errorf("pgstore: send to %s: %w", id, err)
	}
	return s.awaitOutcome(ctx, seq)
}

// awaitOutcome waits for message row seq to be handled and returns its
// outcome, or withdraws it when ctx ends first.
func (s *Store) awaitOutcome(ctx context.Context, seq int64) (store.Delivery, error) {
	wake := s.msgWaits.add(seq)
	defer s.msgWaits.remove(seq)
	poll := time.NewTicker(s.cfg.poll)
	defer poll.Stop()
	for {
		// Read after registering: a notification sent before is not lost.
		d, done, err := s.messageOutcome(ctx, seq)
		switch {
		case err != nil && ctx.Err() != nil:
			return s.withdraw(ctx, seq)
		case err != nil:
			return store.Delivery{}, err
		case done:
			return d, nil
		}
		select {
		case <-wake:
		case <-poll.C:
		case <-ctx.Done():
			return s.withdraw(ctx, seq)
		}
	}
}

// messageOutcome reads whether message seq was handled, and how.
func (s *Store) messageOutcome(ctx context.Context, seq int64) (d store.Delivery, done bool, err error) {
	err = s.pool.QueryRow(ctx, `SELECT handled_at IS NOT NULL, message_id, err_code, err_text FROM bgtask_messages WHERE id = $1`, seq).
		Scan(&done, &d.MessageID, &d.Code, &d.Text)
	if err != nil {
		return store.Delivery{}, false, fmt.Errorf("pgstore: read message %d: %w", seq, err)
	}
	return d, done, nil
}

// withdraw withdraws message seq, whose sender's ctx ended, unless an
// instance handled it or is handing it over: it returns the outcome of a
// handled one, and ctx's error otherwise.
func (s *Store) withdraw(ctx context.Context, seq int64) (store.Delivery, error) {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.grace)
	defer cancel()
	tag, err := s.pool.Exec(wctx, `UPDATE bgtask_messages SET handled_at = now(), err_code = $2
		WHERE id = $1 AND handled_at IS NULL AND claimed_at IS NULL`, seq, withdrawn)
	switch {
	case err != nil:
		return store.Delivery{}, fmt.Errorf("%w (and withdrawing the message failed, so it may still be delivered: %v)", context.Cause(ctx), err)
	case tag.RowsAffected() == 1:
		return store.Delivery{}, context.Cause(ctx)
	}
	d, done, err := s.messageOutcome(wctx, seq)
	switch {
	case err != nil:
		return store.Delivery{}, fmt.Errorf("%w (the message may have been delivered: %v)", context.Cause(ctx), err)
	case done:
		return d, nil
	}
	return store.Delivery{}, fmt.Errorf("%w (the task's instance was handing the message over: it may have been delivered)", context.Cause(ctx))
}

// handleMessages hands the messages addressed to instance id to the tasks,
// oldest first: it claims a batch (so no sender withdraws them and no
// other pass takes them), calls rt.MessageRequested for each in order, and
// records each outcome with a notification to its sender. A process that
// dies between the claim and the outcome leaves the claimed rows to the
// reaper, which fails them: the task died with it.
func (s *Store) handleMessages(ctx context.Context, rt store.Runtime, id string) error {
	for {
		rs, err := s.bg.Query(ctx, `UPDATE bgtask_messages SET claimed_at = now() WHERE id IN (
				SELECT id FROM bgtask_messages WHERE instance = $1 AND handled_at IS NULL AND claimed_at IS NULL
				ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED)
			RETURNING id, task_id, owner, message`, id, messageBatch)
		if err != nil {
			return err
		}
		type req struct {
			seq         int64
			task, owner string
			msg         []byte
		}
		reqs, err := pgx.CollectRows(rs, func(row pgx.CollectableRow) (r req, err error) {
			return r, row.Scan(&r.seq, &r.task, &r.owner, &r.msg)
		})
		if err != nil {
			return err
		}
		slices.SortFunc(reqs, func(a, b req) int { return cmp.Compare(a.seq, b.seq) })
		for _, r := range reqs {
			var d store.Delivery
			var c carried
			if err := json.Unmarshal(r.msg, &c); err != nil {
				d = store.Delivery{Code: "error", Text: fmt.Sprintf("pgstore: message %d: %v", r.seq, err)}
			} else if c.Output != nil {
				// A read of an output may wait for new output: it is
				// answered on its own, never ahead of or behind a message.
				s.wg.Go(func() { s.answerOutput(ctx, rt, r.seq, r.owner, r.task, *c.Output) })
				continue
			} else {
				d = rt.MessageRequested(ctx, r.owner, r.task, c.Message)
			}
			if err := s.recordOutcome(ctx, r.seq, d); err != nil {
				return err
			}
		}
		if len(reqs) < messageBatch {
			return nil
		}
	}
}

// carried is a row's message: a bgtype.Message, or a read of an output
// (CarryOutput) under a key that no bgtype.Message has, so that a sent
// message can never be taken for a read.
type carried struct {
	bgtype.Message
	Output *store.OutputRequest `json:"bgtask_output_read,omitempty"`
}

// recordOutcome records the outcome d of message row seq and tells its
// sender.
func (s *Store) recordOutcome(ctx context.Context, seq int64, d store.Delivery) error {
	return s.recordOutcomeSQL(ctx, recordOutcomeSQL, seq, d)
}

// recordOutcomeSQL records outcome $2-$4 of message row $1 and notifies
// its sender (on $5, the scope's message-done channel); recordReadSQL does it for an output read, without waiting
// for the flush (asyncCommit).
const (
	recordOutcomeSQL = `WITH u AS (
			UPDATE bgtask_messages SET handled_at = now(), message_id = $2, err_code = $3, err_text = $4
			WHERE id = $1 RETURNING id)
		SELECT pg_notify($5, id::text) FROM u`
	recordReadSQL = `WITH ` + asyncCommit + `, u AS (
			UPDATE bgtask_messages SET handled_at = now(), message_id = $2, err_code = $3, err_text = $4
			WHERE id = $1 AND EXISTS (SELECT FROM async) RETURNING id)
		SELECT pg_notify($5, id::text) FROM u`
)

func (s *Store) recordOutcomeSQL(ctx context.Context, sql string, seq int64, d store.Delivery) error {
	if _, err := s.bg.Exec(ctx, sql, seq, d.MessageID, d.Code, d.Text, s.scope.messageDone); err != nil {
		return fmt.Errorf("record the outcome of message %d: %w", seq, err)
	}
	return nil
}

// answerOutput answers the read of an output in row seq with rt's
// OutputHandler and records the answer.
func (s *Store) answerOutput(ctx context.Context, rt store.Runtime, seq int64, owner, id string, req store.OutputRequest) {
	d := store.Delivery{Code: "error", Text: "pgstore: the runtime of this instance does not read outputs"}
	if h, ok := rt.(store.OutputHandler); ok {
		d = h.OutputRequested(ctx, owner, id, req)
	}
	if err := s.recordOutcomeSQL(ctx, recordReadSQL, seq, d); err != nil && ctx.Err() == nil {
		s.log.Warn("pgstore: answering an output read failed", "task_id", id, "err", err)
	}
}

// carryOutputSQL records a read ($2 the reader's owner, $3 the read) of
// task $1's output, addressed to the instance its record names if that
// instance is alive, and notifies it ($4, the scope's message channel)
// when the transaction commits.
var carryOutputSQL = `WITH ` + asyncCommit + `, r AS (
		INSERT INTO bgtask_messages (task_id, instance, owner, message)
		SELECT t.id, t.instance, $2, $3 FROM bgtask_tasks t
		JOIN bgtask_instances i ON i.id = t.instance AND i.state = 'alive'
		WHERE t.id = $1 AND EXISTS (SELECT FROM async)
		RETURNING id, instance)
	SELECT id, pg_notify($4, instance) FROM r`

// asyncCommit is a CTE (async) that makes the transaction of its
// statement commit without waiting for its WAL flush (synchronous_commit
// off for that transaction alone), when the statement reads it: for the
// rows of an output read, which change nothing a crash must keep (a read
// lost with the server fails, or is read again; a row left behind goes
// with retention), so a read does not wait for three flushes.
const asyncCommit = `async AS (SELECT set_config('synchronous_commit', 'off', true))`

// CarryOutput implements store.OutputCarrier: it records the read in
// bgtask_messages addressed to the instance that runs (or ran) the task,
// notifies it, and waits for its answer as SendMessage waits for a
// message's outcome. That instance answers each read on a goroutine of
// its own.
func (s *Store) CarryOutput(ctx context.Context, owner, id string, req store.OutputRequest) (store.Delivery, error) {
	if s.isClosed() {
		return store.Delivery{}, ErrClosed
	}
	body, err := json.Marshal(carried{Output: &req})
	if err != nil {
		return store.Delivery{}, fmt.Errorf("pgstore: read the output of %s: %w", id, err)
	}
	var seq int64
	err = s.pool.QueryRow(ctx, carryOutputSQL, id, owner, body, s.scope.message).Scan(&seq, nil) // the second column is pg_notify's void
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		var instance string
		if err := s.pool.QueryRow(ctx, `SELECT instance FROM bgtask_tasks WHERE id = $1`, id).Scan(&instance); err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return store.Delivery{}, fmt.Errorf("pgstore: read the output of %s: %w", id, err)
		}
		return store.Delivery{Code: store.DeliveryGone, Text: instance}, nil
	case err != nil:
		return store.Delivery{}, fmt.Errorf("pgstore: read the output of %s: %w", id, err)
	}
	d, err := s.awaitOutcome(ctx, seq)
	// The read is the reader's alone: answered or given up, its row need
	// not wait for retention (an answer that comes later updates nothing).
	// A failed delete leaves it to retention.
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.grace)
	_, _ = s.pool.Exec(dctx, `WITH `+asyncCommit+` DELETE FROM bgtask_messages WHERE id = $1 AND EXISTS (SELECT FROM async)`, seq)
	cancel()
	return d, err
}

// failGoneMessagesSQL fails the messages that instances which are not
// alive never handled (claimed or not), and tells their senders (on $1,
// the scope's message-done channel).
var failGoneMessagesSQL = `WITH g AS (
		UPDATE bgtask_messages m SET handled_at = now(), err_code = '` + store.DeliveryGone + `', err_text = m.instance
		WHERE handled_at IS NULL AND instance IN (SELECT id FROM bgtask_instances WHERE state <> 'alive')
		RETURNING id)
	SELECT pg_notify($1, id::text) FROM g`

// failGoneMessages runs failGoneMessagesSQL.
func (s *Store) failGoneMessages(ctx context.Context, db *pgxpool.Pool) error {
	rs, err := db.Query(ctx, failGoneMessagesSQL, s.scope.messageDone)
	if err != nil {
		return fmt.Errorf("pgstore: reap: fail messages to gone instances: %w", err)
	}
	n := 0
	for rs.Next() {
		n++
	}
	rs.Close()
	if err := rs.Err(); err != nil {
		return fmt.Errorf("pgstore: reap: fail messages to gone instances: %w", err)
	}
	if n > 0 {
		s.log.Warn("pgstore: messages to gone instances failed", "messages", n)
	}
	return nil
}

var (
	_ store.MessageCarrier = (*Store)(nil)
	_ store.OutputCarrier  = (*Store)(nil)
)
