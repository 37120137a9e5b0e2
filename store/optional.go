package store

import (
	"context"
	"iter"
	"time"

	"github.com/bgtask/bgtask/bgtype"
)

// OrphanInterrupter is a Store that can end, for every owner at once, the records
// that a runtime instance which is gone left queued, running or awaiting
// input. Manager.InterruptOrphaned uses it. A durable Store implements it when it can
// tell a gone instance from a live one: a single-process store by a lock
// that its process holds while it is open, a SharedStore by its reaper.
type OrphanInterrupter interface {
	// InterruptOrphaned makes every non-terminal record of every owner that a gone
	// runtime instance left interrupted (with Interrupted), in batches, and
	// returns how many it interrupted. A record of a live instance is never
	// touched. A corrupt record is skipped and named in the returned
	// error; the others are still recovered.
	InterruptOrphaned(ctx context.Context) (int, error)
}

// InstanceLiveness is a Store, shared by processes that each run their own
// Manager on it (a file several processes open), that can tell whether the
// runtime instance that wrote a record still runs. Restore uses it: a
// record that another instance left queued or running is interrupted only
// once that instance is known to be gone, never while the process that
// runs the task may still end it. A SharedStore needs no such answer: its
// reaper ends the records of the instances that stopped, and Restore
// leaves every other instance's records to it.
type InstanceLiveness interface {
	// InstanceAlive reports whether the runtime instance (a Manager's
	// WithInstance id) still runs in a process that uses the store.
	// Restore interrupts the records of an instance reported gone, so a
	// store reports alive when unsure, and documents any exception (a
	// platform where it cannot tell). The empty instance is never alive.
	InstanceAlive(ctx context.Context, instance string) (bool, error)
}

// UndeliveredLister is a Store that can tell, for every owner at once,
// which owners have something they were never told. Manager.UndeliveredOwners
// and WithOnPendingOwner use it. Every store of this module implements it
// (the in-memory store from its records, the durable stores with an indexed
// query).
type UndeliveredLister interface {
	// UndeliveredOwners yields, each once and in no particular order, every
	// owner that holds a terminal record that is neither announced (see
	// Announce) nor silent (WakeSilent), and, for a SharedStore, every
	// owner with a notice not yet taken (TakeNotices). Owners are yielded
	// as the records name them: a sub-agent's task id included. It changes
	// nothing. A failure is yielded once, as the last pair, with "".
	UndeliveredOwners(ctx context.Context) iter.Seq2[string, error]
}

// InstanceOwnerLister is a SharedStore that can list the owners of one
// runtime instance's live records. A process that restarts with the same
// instance id (as a SharedStore's hosts are asked to) finds the records
// its previous run left queued or running still live: no reaper ends them,
// since the instance is alive again, and only a Restore of their owner
// does. WithOnPendingOwner uses it to wake those owners at start too.
type InstanceOwnerLister interface {
	// InstanceOwners yields, each once and in no particular order, every
	// owner that holds a queued, running or awaiting-input record of
	// instance. It changes nothing. A failure is yielded once, as the last
	// pair, with "".
	InstanceOwners(ctx context.Context, instance string) iter.Seq2[string, error]
}

// PendingOwnerFinder is a Store that tells at once which of several owners
// hold records that Restore has work for. Restore uses it to follow the
// interrupted tasks to the tasks they owned with one call per batch instead
// of reading each one's records; with a Store that does not implement it,
// Restore reads each.
type PendingOwnerFinder interface {
	// PendingOwners returns those of owners that hold at least one record
	// that is not terminal or not announced, each once, in any order. It
	// may return more (an owner it is unsure of), never fewer.
	PendingOwners(ctx context.Context, owners []string) ([]string, error)
}

// TagLister is a Store that filters by tag itself, with an index. Every
// Store of this module implements it; for one that does not, ListTagged
// filters the store's List.
type TagLister interface {
	// ListTagged is Store.List restricted to the records whose Tags hold
	// tag; an empty tag restricts nothing.
	ListTagged(ctx context.Context, owner, tag string, statuses ...bgtype.Status) iter.Seq2[bgtype.TaskMeta, error]
}

// RunLeaser is a SharedStore that keeps, for each owner, the one run open
// across the runtime instances that share it: a thread's turns may land
// on any instance, and two runs of one thread at once would hand its
// events out twice. A Receiver opens its run here at RunStart and closes
// it at RunEnd; a run held by an instance that is gone (stopped, or
// declared dead by the reaper) is free.
//
// The lease also carries what a run ended without proof of: the ends an
// aborted run handed to the model (RunOutcome.Aborted) are in the
// thread's conversation but not yet heard, and the owner's next run,
// wherever it opens, must not hand them again. And it carries a stop: a
// cancel of the run asked on another instance reaches the one that holds
// it (RunCancelHandler), which ends the run's turn.
type RunLeaser interface {
	// OpenRun records run as owner's open run, held by instance, and
	// returns the ids of the tasks whose ends the owner's previous run
	// carried (CloseRun's carried), which it forgets. It fails with
	// ErrRunHeld while another live instance holds a run of owner, and
	// then changes nothing; a run instance itself holds (one its Receiver
	// left open: a failed CloseRun) is replaced.
	OpenRun(ctx context.Context, owner, run, instance string) (carried []string, err error)
	// CloseRun releases owner's run if instance holds it as run; otherwise
	// it changes nothing and returns nil. carried (capped by the store; the
	// rest are handed out again) are the tasks whose ends the run handed
	// out and that are not heard yet: the owner's next OpenRun returns
	// them, if the process that closed the run still runs (else the
	// conversation they were shown in may be gone: they are handed out
	// again, as after a crash).
	CloseRun(ctx context.Context, owner, run, instance string, carried []string) error
	// HeldRun returns owner's open run and the live instance that holds
	// it, or two empty strings when none.
	HeldRun(ctx context.Context, owner string) (run, instance string, err error)
	// RequestRunCancel asks the live instance that holds owner's open run
	// run, if it is not from, to cancel that run with reason
	// (RunCancelHandler.RunCancelRequested on its runtime), and returns
	// that instance; "" when no other live instance holds run open.
	RequestRunCancel(ctx context.Context, owner, run, reason, from string) (instance string, err error)
}

// ChangeNotifier is a Store that tells when a record may have settled
// (become terminal or awaiting input) in any process that shares it, so
// that a Manager can wait for a task that another instance runs without
// reading its record in a loop. pgstore implements it with LISTEN/NOTIFY.
// A notification can be lost (the listening connection dropped, the store
// was not started), so a waiter also reads the record every
// SettledPollInterval.
type ChangeNotifier interface {
	// OnSettled registers f to be called with the id of each record that
	// a commit (this process's or another's, the reaper's included) made
	// terminal or awaiting input, and its owner ("" when the store does
	// not say: pgstore leaves out an owner over 4,000 bytes), after that
	// commit. An id that starts with "-" is no record's: a notice was
	// posted for owner (NoticePoster) by the instance named after the "-"
	// (none: the store does not say which).
	// f may be called for other ids, more than once, or late;
	// never before the commit. f is called on the store's goroutine: it
	// must be fast and must not block or call the store. The returned
	// function unregisters f; after it returns, f is not called again.
	OnSettled(f func(id, owner string)) (stop func())
	// SettledPollInterval is how often a waiter reads a record again when
	// it heard nothing: the fallback for a lost notification. Positive.
	SettledPollInterval() time.Duration
}

// MessageCarrier is a SharedStore that carries a message (or the answer to
// an input request) to a task that another runtime instance runs, and its
// outcome back. pgstore implements it with a row per message.
type MessageCarrier interface {
	// SendMessage records msg, sent by owner to task id, addressed to the
	// instance the task's record names while the record is live, tells
	// that instance, and waits until its Runtime.MessageRequested handled
	// the message, once; it returns that outcome. Messages to one
	// instance are handed over in the order they were recorded. When the
	// record is not live at the send, the outcome is DeliveryEnded and
	// nothing is recorded; when the instance is gone before it handled the
	// message (a reaper found it dead), DeliveryGone. If ctx ends first,
	// the message is withdrawn unless it was handled already (then that
	// outcome is returned), and ctx's error is returned: a message is
	// either handled and its outcome returned, or never handed over.
	SendMessage(ctx context.Context, owner, id string, msg bgtype.Message) (Delivery, error)
}

// Delivery is the outcome of a message carried to another instance. The
// runtime (bgtask's Manager) fills Code and Text with the kind and text of
// its error, "" when the task took the message; a store carries them
// without reading them, except for its own codes DeliveryEnded and
// DeliveryGone.
type Delivery struct {
	// MessageID is the message's id in the task's history (Owner.Messages
	// on the instance that runs it), when the task took it.
	MessageID string
	Code      string
	Text      string
}

// The outcomes a MessageCarrier itself gives.
const (
	// DeliveryEnded: the task's record was not live when the message was
	// sent; nothing was recorded.
	DeliveryEnded = "ended"
	// DeliveryGone: the instance that ran the task is gone (a reaper
	// found it dead, and interrupted the task) before it handled the
	// message. Text names the instance.
	DeliveryGone = "instance_gone"
)

// NoticePoster is a SharedStore that keeps, for an owner, events that no
// run of the owner in this process will hand out: a message or an input
// request from a task (a sub-agent's to its parent, say) while the owner's
// run is open on another instance, or no run is open at all. They are
// notices like the reaper's, taken by the owner's next Deliver wherever it
// runs (TakeNotices), once, in the order posted; the store tells the
// other instances, so an idle Receiver of the owner wakes (see
// ChangeNotifier: pgstore names the owner with the id "-").
type NoticePoster interface {
	// PostNotices records evs as notices for owner, in order, all or
	// none, posted by the runtime instance named.
	PostNotices(ctx context.Context, owner, instance string, evs []bgtype.Event) error
}

// KindQueue is a Store that finds, for every owner at once, the records of
// resumable tasks that wait in the queue for a live instance to claim
// them (Waiting): a new attempt after a crash or a stop. A Manager that
// registered kinds claims them from it. sqlitestore implements it with a
// partial index.
type KindQueue interface {
	// WaitingTasks returns up to limit waiting records of every owner,
	// oldest first (CreatedAt, then ID). A corrupt record is skipped and
	// named in the returned error, with the good ones.
	WaitingTasks(ctx context.Context, limit int) ([]bgtype.TaskMeta, error)
}

// KindLimiter is a KindQueue that holds a cap on how many attempts of a
// kind run at once across every instance sharing it (the kind's
// MaxRunning): pgstore implements it. A Manager claims the waiting
// records of a kind that declares a cap through it, and spawns such a
// kind into the queue, so every attempt of the kind starts by a claim.
type KindLimiter interface {
	KindQueue
	// ClaimUnder commits claim, a waiting record as the claiming instance
	// runs it (running, with its instance), as Commit does, if fewer than
	// limit records of its kind (Resume.Kind) are running; it reports
	// whether there was room. The count and the write are atomic against
	// every other ClaimUnder of the kind. With room, the reducer may still
	// drop the write (another claim came first): read the record back.
	ClaimUnder(ctx context.Context, claim bgtype.TaskMeta, limit int) (bool, error)
}

// KindClaimer is a KindQueue that claims many waiting records in one
// step, for one instance, skipping those another claim holds at that
// moment instead of waiting for it: the instances of a fleet claim
// different records rather than queue behind each other's row locks and
// each lose most of them. pgstore implements it.
type KindClaimer interface {
	KindQueue
	// ClaimTasks claims for c.Instance up to c.Max waiting records
	// (Waiting) of the kinds in c.Kinds, oldest first, leaving those that
	// another transaction holds: each is written through the reducer, as
	// Commit does, running on c.Instance on the attempt it waited for,
	// with Resume.ResumedAt c.At. A kind with a limit claims only while
	// fewer than its limit of its records run, counted as
	// KindLimiter.ClaimUnder counts. It returns the records it claimed, as
	// stored, oldest first; none is not an error.
	ClaimTasks(ctx context.Context, c Claim) ([]bgtype.TaskMeta, error)
}

// Claim is what KindClaimer.ClaimTasks claims. The zero value claims
// nothing.
type Claim struct {
	Instance string         // the claiming instance; required
	Kinds    map[string]int // kind -> how many of its records may run at once (its MaxRunning); 0: no limit
	Max      int            // at most this many records
	At       time.Time      // the claim's time: the commit's At and Resume.ResumedAt
}

// OutputCarrier is a SharedStore that carries a read of a task's output
// to the runtime instance that runs (or ran) the task, and the piece back:
// a task's output is kept in that instance's memory only (bgtask's
// Task.Output), so a reader on another instance asks it there. pgstore
// implements it with a row of its messages' table per read.
type OutputCarrier interface {
	// CarryOutput records req, asked by owner about task id, addressed to
	// the instance that the task's record names, tells that instance, and
	// waits until its OutputHandler answered, once; it returns that
	// answer. Reads are answered concurrently, in no order, and never wait
	// behind a message. When the record names no instance that is alive,
	// the answer is DeliveryGone with the instance in Text, and nothing
	// is recorded; when the instance is gone before it answered, also
	// DeliveryGone. If ctx ends first, the read is withdrawn unless it
	// was answered (then that answer is returned), and ctx's error is
	// returned.
	CarryOutput(ctx context.Context, owner, id string, req OutputRequest) (Delivery, error)
}

// OutputRequest is a read of a task's output carried to another instance
// (OutputCarrier). The store carries it without reading it.
type OutputRequest struct {
	// From is the offset to read from; with Tail, ignored.
	From int64 `json:"from"`
	// Limit is how many bytes to read at most.
	Limit int `json:"limit"`
	// Tail reads the last Limit bytes.
	Tail bool `json:"tail,omitempty"`
	// Wait, when positive, is how long the answering instance waits for
	// output past From, or the task's end, before it reads.
	Wait time.Duration `json:"wait,omitempty"`
}

// OutputHandler is a Runtime that answers reads of its tasks' outputs
// asked on other instances (OutputCarrier). The Runtime of a
// *bgtask.Manager implements it. A store calls it on a goroutine of its
// own per read, with no lock of its own held.
type OutputHandler interface {
	// OutputRequested reads the output of task id, asked by owner, as
	// req says, and returns the answer to carry back: Code and Text are the
	// kind and text of its error, or "" and the piece read, in a form only
	// the runtime reads. It never carries the read on to another
	// instance. It blocks at most req.Wait (bounded by the runtime), or
	// until ctx ends.
	OutputRequested(ctx context.Context, owner, id string, req OutputRequest) Delivery
}
