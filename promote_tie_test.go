package bgtask

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/internal/memstore"
	"github.com/bgtask/bgtask/store"
)

// slowResult is a function's result whose encoding takes d of the bubble's
// fake time: the function has returned, its end is not recorded yet.
type slowResult struct{ d time.Duration }

func (r slowResult) MarshalJSON() ([]byte, error) {
	<-time.After(r.d) // the bubble's fake time
	return []byte(`"encoded"`), nil
}

// A function that returned before its time was up, whose end is still
// being recorded when the time is up (or the caller hangs up): the end
// wins. The call returns the function's result as a call that ended in
// the foreground does, with no promotion notice, and the owner hears
// nothing; a caller that hung up gets its ctx's cause, and the end reaches
// the owner once, as an event.
func TestForegroundEndWinsOverPromotion(t *testing.T) {
	t.Parallel()
	for _, hangUp := range []bool{false, true} {
		t.Run(fmt.Sprintf("caller gone %v", hangUp), func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				const d = time.Second
				m := newTestManager(t)
				o := m.Owner("alice")
				ib, err := o.Inbox()
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithCancelCause(t.Context())
				defer cancel(nil)
				hungUp := errors.New("client gone")
				if hangUp {
					go func() {
						<-time.After(3 * d / 4) // the bubble's fake time: after the return, before the limit
						cancel(hungUp)
					}()
				}
				start := time.Now()
				res, err := o.Foreground(ctx, d, func(context.Context, *Task) (any, error) {
					<-time.After(d / 2)       // the bubble's fake time
					return slowResult{d}, nil // encoded by 3d/2
				})
				took := time.Since(start)
				if hangUp {
					if !errors.Is(err, hungUp) || res.Promoted || res.Status != bgtype.StatusCompleted || res.Result != nil || took != 3*d/2 {
						t.Fatalf("Foreground after %v: promoted %v, %s, %s, %v; want the caller's cause, not promoted", took, res.Promoted, res.Status, res.Result, err)
					}
				} else if err != nil || res.Promoted || res.Status != bgtype.StatusCompleted || string(res.Result) != `"encoded"` || took != 3*d/2 {
					t.Fatalf("Foreground after %v: promoted %v, %s, %s, %v; want its result, not promoted", took, res.Promoted, res.Status, res.Result, err)
				}
				synctest.Wait()
				evs := ib.Drain()
				meta := getTask(t, o, res.TaskID)
				if meta.Status != bgtype.StatusCompleted || string(meta.Result) != `"encoded"` {
					t.Fatalf("record %s %s, want completed \"encoded\"", meta.Status, meta.Result)
				}
				if hangUp {
					if len(evs) != 1 || evs[0].Kind != bgtype.EventCompleted || evs[0].TaskID != res.TaskID {
						t.Fatalf("events %+v, want its completion once", evs)
					}
					return
				}
				if len(evs) != 0 || !meta.Announced {
					t.Fatalf("events %+v, announced %v; want none, its end answered in the foreground", evs, meta.Announced)
				}
			})
		})
	}
}

// Many foreground calls whose functions return as their time is up, on
// real goroutines (run it with -race): each call gets exactly one of its
// result and the promotion, the notice's task_status is the status the
// call reports and never a terminal one, and the owner hears of the end of
// exactly the promoted calls, once each.
func TestForegroundTieConcurrent(t *testing.T) {
	t.Parallel()
	m := newTestManager(t)
	o := m.Owner("alice")
	ib, err := o.Inbox()
	if err != nil {
		t.Fatal(err)
	}
	const calls = 200
	results := make([]ForegroundResult, calls)
	errs := make([]error, calls)
	var wg sync.WaitGroup
	for i := range calls {
		wg.Go(func() {
			d := time.Duration(i%3) * 50 * time.Microsecond // either outcome is right: the mix only varies
			results[i], errs[i] = o.Foreground(t.Context(), d, func(context.Context, *Task) (any, error) {
				if i%2 == 0 {
					runtime.Gosched()
				}
				return i, nil
			})
		})
	}
	wg.Wait()
	promoted := map[string]bool{}
	for i, res := range results {
		if errs[i] != nil {
			t.Fatalf("call %d: %v", i, errs[i])
		}
		if _, err := o.Wait(t.Context(), res.TaskID); err != nil {
			t.Fatal(err)
		}
		if !res.Promoted {
			if res.Status != bgtype.StatusCompleted || string(res.Result) != fmt.Sprint(i) {
				t.Fatalf("call %d in the foreground: %s %s, want completed %d", i, res.Status, res.Result, i)
			}
			continue
		}
		promoted[res.TaskID] = true
		var n promotionNotice
		if err := json.Unmarshal(res.Result, &n); err != nil {
			t.Fatal(err)
		}
		if res.Status.IsTerminal() || n.TaskStatus != res.Status || n.Status != "promoted" || n.TaskID != res.TaskID {
			t.Fatalf("call %d promoted with status %s: notice %s", i, res.Status, res.Result)
		}
	}
	heard := map[string]int{}
	for _, ev := range ib.Drain() {
		if ev.Kind.IsTerminal() {
			heard[ev.TaskID]++
		}
	}
	for id := range promoted {
		if heard[id] != 1 {
			t.Errorf("promoted task %s: heard %d times, want once", id, heard[id])
		}
	}
	for id, n := range heard {
		if !promoted[id] {
			t.Errorf("task %s answered in the foreground: heard %d times, want never", id, n)
		}
	}
	t.Logf("%d of %d calls promoted", len(promoted), calls)
}

// held returns how many foreground ends h holds for their calls.
func (h *heldAnswers) held() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.ids)
}

// sharedMem is a durable in-memory store that says it is shared with other
// instances (store.SharedStore), which have nothing to tell: a Receiver
// then checks the records of the ends it hands out (dropHeardElsewhere).
type sharedMem struct{ *durableMem }

func (sharedMem) RequestCancel(context.Context, string, bool, string) error { return nil }

func (sharedMem) TakeNotices(context.Context, string) ([]bgtype.Event, error) { return nil, nil }

// A foreground call whose caller hung up as its function returned, with
// a store shared by a fleet (decision 804): its end reaches the owner's
// run once, as an event, marked heard at the step after; with
// WithCancelOnAbandon it is never announced, though a run is open (its
// end was held for the call). Before, its record was marked heard at its
// commit, as a returned result's is, and the Receiver dropped the event as
// heard on another instance.
func TestForegroundEndOfAHungUpCallWithASharedStore(t *testing.T) {
	t.Parallel()
	for _, cancelOnAbandon := range []bool{false, true} {
		t.Run(fmt.Sprintf("cancel on abandon %v", cancelOnAbandon), func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				const d = time.Second
				ds := sharedMem{&durableMem{Store: memstore.New()}}
				pr := newReceiverRun(t, WithStore(ds))
				ctx, cancel := context.WithCancelCause(t.Context())
				defer cancel(nil)
				hungUp := errors.New("client gone")
				go func() {
					<-time.After(3 * d / 4) // the bubble's fake time: after the return, before the limit
					cancel(hungUp)
				}()
				var opts []SpawnOption
				if cancelOnAbandon {
					opts = append(opts, WithCancelOnAbandon())
				}
				res, err := pr.o.Foreground(ctx, d, func(context.Context, *Task) (any, error) {
					<-time.After(d / 2)       // the bubble's fake time
					return slowResult{d}, nil // encoded by 3d/2
				}, opts...)
				if !errors.Is(err, hungUp) || res.Promoted {
					t.Fatalf("Foreground = %+v, %v; want the caller's cause, not promoted", res, err)
				}
				<-time.After(d) // the bubble's fake time: its end is recorded by then
				synctest.Wait()
				evs, err := pr.p.Deliver(t.Context())
				switch {
				case err != nil:
					t.Fatal(err)
				case cancelOnAbandon && len(evs) != 0:
					t.Fatalf("Deliver = %+v; want nothing", evs)
				case !cancelOnAbandon && (len(evs) != 1 || evs[0].Kind != bgtype.EventCompleted || evs[0].TaskID != res.TaskID || string(evs[0].Result) != `"encoded"`):
					t.Fatalf("Deliver = %+v; want %s completed, once", evs, res.TaskID)
				}
				if evs, err := pr.p.Deliver(t.Context()); err != nil || len(evs) != 0 {
					t.Fatalf("the next Deliver = %+v, %v; want nothing", evs, err)
				}
				if !marked(t, ds.durableMem, res.TaskID) {
					t.Fatal("not marked announced")
				}
				if n := pr.m.answers.held(); n != 0 {
					t.Fatalf("%d ends still held for calls that returned", n)
				}
			})
		})
	}
}

// An end held for the run that was open when the task ended in the
// foreground goes to the owner as an event when its call returns after
// that run ended and another opened: the new run's model never read the
// call's result, so it is not marked heard with that run's proof.
func TestForegroundAnswerOfAnEndedRunIsAnEvent(t *testing.T) {
	ds := &durableMem{Store: memstore.New()}
	pr := newReceiverRun(t, WithStore(ds))
	meta := getTask(t, pr.o, finishTasks(t, pr.m, "thread-1", nil)[0])
	if got := deliverIDs(t, pr.p); len(got) != 1 {
		t.Fatalf("handed out %q, want the task's end", got)
	}
	// As answeredInForeground holds a foreground end for the open run.
	pr.m.answers.hold(meta.ID, pr.p.runSeq.Load())
	endRun(t, pr.p, RunOutcome{RunID: "run-1", Aborted: true})
	if n, err := pr.p.Undeliver(); err != ErrNoRun || n != 0 {
		t.Fatalf("Undeliver after the run = %d, %v", n, err)
	}
	if err := pr.p.RunStart(t.Context(), RunInfo{RunID: "run-2"}); err != nil {
		t.Fatal(err)
	}
	pr.m.handAnswer(&meta)
	if got := deliverIDs(t, pr.p); !slices.Equal(got, []string{meta.ID}) {
		t.Fatalf("run-2 handed out %q, want the end the call returned after run-1 ended", got)
	}
}

// gatedCommits is a durable store whose next Commit, once armed, waits
// for open to be closed: a task's end whose record is not committed yet.
type gatedCommits struct {
	*durableMem
	armed   atomic.Bool
	entered chan struct{} // closed when the armed Commit waits
	open    chan struct{}
}

func (s *gatedCommits) Commit(ctx context.Context, owner string, actions ...store.Action) error {
	if s.armed.CompareAndSwap(true, false) {
		close(s.entered)
		<-s.open
	}
	return s.durableMem.Commit(ctx, owner, actions...)
}

// A caller with WithCancelOnAbandon that hangs up while the end of its
// task, ended in the foreground and held for its run, is being committed:
// the end is never announced, as the option says (decision 804).
func TestForegroundCancelOnAbandonWhileItsEndCommits(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		gs := &gatedCommits{durableMem: &durableMem{Store: memstore.New()}, entered: make(chan struct{}), open: make(chan struct{})}
		pr := newReceiverRun(t, WithStore(gs))
		ctx, cancel := context.WithCancelCause(t.Context())
		defer cancel(nil)
		type call struct {
			res ForegroundResult
			err error
		}
		done := make(chan call, 1)
		go func() {
			res, err := pr.o.Foreground(ctx, time.Hour, func(context.Context, *Task) (any, error) {
				gs.armed.Store(true) // its end's commit waits
				return "late", nil
			}, WithCancelOnAbandon())
			done <- call{res, err}
		}()
		<-gs.entered
		hungUp := errors.New("client gone")
		cancel(hungUp)
		synctest.Wait() // the call waits for the end it abandons
		close(gs.open)
		c := <-done
		if !errors.Is(c.err, hungUp) || c.res.Promoted {
			t.Fatalf("Foreground = %+v, %v; want the caller's cause, not promoted", c.res, c.err)
		}
		synctest.Wait()
		if evs, err := pr.p.Deliver(t.Context()); err != nil || len(evs) != 0 {
			t.Fatalf("Deliver = %+v, %v; want nothing", evs, err)
		}
		if !marked(t, gs.durableMem, c.res.TaskID) {
			t.Fatal("the end is not marked announced")
		}
		if n := pr.m.answers.held(); n != 0 {
			t.Fatalf("%d ends still held for calls that returned", n)
		}
	})
}
