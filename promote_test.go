package bgtask

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
	"unicode/utf8"

	"github.com/bgtask/bgtask/internal/memstore"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/internal/idgen"
)

// notice is the promotion notice the model reads for task id.
func notice(id string, status bgtype.Status, d time.Duration) string {
	lead := fmt.Sprintf("The call was still running after %v: it goes on in the background as task %s. ", d, id)
	switch status {
	case bgtype.StatusQueued:
		lead = fmt.Sprintf("The call was still waiting for a free slot after %v: it goes on in the background as task %s. ", d, id)
	case bgtype.StatusAwaitingInput:
		lead = "The call goes on in the background as task " + id + ", which asks for input: " +
			"get_task shows the request; answer it with send_message (in_reply_to the request id). "
	}
	return toJSON(struct {
		Status     string `json:"status"`
		TaskID     string `json:"task_id"`
		TaskStatus string `json:"task_status"`
		Message    string `json:"message"`
	}{"promoted", id, string(status),
		lead + "Its result will be announced when it ends; to wait for it now, call wait_task with this task_id."})
}

// Each outcome of a foreground call, in fake time: what Foreground returns
// and when, what the owner's inbox gets (nothing for an end in the
// foreground, the terminal event once for a promoted call), the record, and
// that the function ran once with a context the promotion did not cancel.
func TestForegroundOutcomes(t *testing.T) {
	t.Parallel()
	const d = 2 * time.Second
	sleepThen := func(dur time.Duration, v any, err error) Func {
		return func(ctx context.Context, _ *Task) (any, error) {
			<-time.After(dur)
			return v, err
		}
	}
	for _, tc := range []struct {
		name       string
		fn         Func
		promoted   bool
		status     bgtype.Status    // returned
		result     string           // returned, "" when promoted (the notice is checked)
		err        string           // returned error text, with %s for the id
		taskErr    bgtype.ErrorKind // the error is a *TaskError of this kind
		took       time.Duration
		final      bgtype.Status // the record at the end
		events     []bgtype.EventKind
		finalAfter time.Duration // when the task ended, from the call
	}{
		{name: "finishes before d", fn: sleepThen(time.Second, "fast", nil),
			status: bgtype.StatusCompleted, result: `"fast"`, took: time.Second, final: bgtype.StatusCompleted, finalAfter: time.Second},
		{name: "returns at once", fn: sleepThen(0, map[string]int{"n": 1}, nil),
			status: bgtype.StatusCompleted, result: `{"n":1}`, final: bgtype.StatusCompleted},
		{name: "returns nil", fn: sleepThen(0, nil, nil),
			status: bgtype.StatusCompleted, result: `null`, final: bgtype.StatusCompleted},
		{name: "fails before d", fn: sleepThen(time.Second, nil, errors.New("disk full")),
			status: bgtype.StatusFailed, err: "bgtask: task %s failed (error): disk full", taskErr: bgtype.KindError,
			took: time.Second, final: bgtype.StatusFailed, finalAfter: time.Second},
		{name: "panics", fn: panickingTask,
			status: bgtype.StatusFailed, err: "bgtask: task %s failed (panic): panic: boom", taskErr: bgtype.KindPanic,
			final: bgtype.StatusFailed},
		{name: "slow: promoted", fn: sleepThen(10*time.Second, "slow", nil),
			promoted: true, status: bgtype.StatusRunning, took: d, final: bgtype.StatusCompleted,
			events: []bgtype.EventKind{bgtype.EventCompleted}, finalAfter: 10 * time.Second},
		{name: "slow and fails: promoted", fn: sleepThen(10*time.Second, nil, errors.New("late")),
			promoted: true, status: bgtype.StatusRunning, took: d, final: bgtype.StatusFailed,
			events: []bgtype.EventKind{bgtype.EventFailed}, finalAfter: 10 * time.Second},
		{name: "ignores ctx: promoted", fn: func(context.Context, *Task) (any, error) {
			<-time.After(time.Hour)
			return "late", nil
		}, promoted: true, status: bgtype.StatusRunning, took: d, final: bgtype.StatusCompleted,
			events: []bgtype.EventKind{bgtype.EventCompleted}, finalAfter: time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				m := newTestManager(t)
				o := m.Owner("alice")
				ib, err := o.Inbox()
				if err != nil {
					t.Fatal(err)
				}
				var runs atomic.Int32
				ctxs := make(chan context.Context, 1)
				fn := func(ctx context.Context, tk *Task) (any, error) {
					runs.Add(1)
					ctxs <- ctx
					return tc.fn(ctx, tk)
				}
				start := time.Now()
				res, err := o.Foreground(t.Context(), d, fn, WithName("job"))
				if took := time.Since(start); took != tc.took {
					t.Errorf("Foreground took %v, want %v", took, tc.took)
				}
				id := res.TaskID
				if !strings.HasPrefix(id, idgen.TaskPrefix) || res.Promoted != tc.promoted || res.Status != tc.status {
					t.Fatalf("result = %+v, want promoted %v, status %s", res, tc.promoted, tc.status)
				}
				switch {
				case tc.err != "":
					if err == nil || err.Error() != fmt.Sprintf(tc.err, id) || res.Result != nil {
						t.Fatalf("Foreground = %s, %v; want error %q", res.Result, err, fmt.Sprintf(tc.err, id))
					}
					if te, ok := errors.AsType[*TaskError](err); !ok || te.Kind != tc.taskErr {
						t.Errorf("error %#v, want a *TaskError of kind %s", err, tc.taskErr)
					}
				case err != nil:
					t.Fatalf("Foreground: %v", err)
				case tc.promoted:
					if string(res.Result) != notice(id, tc.status, d) {
						t.Errorf("notice = %s\nwant     %s", res.Result, notice(id, tc.status, d))
					}
					if fnCtx := <-ctxs; fnCtx.Err() != nil {
						t.Errorf("the function's context ended at the promotion: %v", context.Cause(fnCtx))
					}
					if pending := m.reporting("alice", map[string]struct{}{}); !pending {
						t.Error("a promoted task is not pending for the plugin")
					}
				default:
					if string(res.Result) != tc.result {
						t.Errorf("result = %s, want %s", res.Result, tc.result)
					}
				}
				meta, _ := o.Wait(t.Context(), id)
				synctest.Wait()
				if meta.Status != tc.final || meta.Name != "job" || meta.FinishedAt.Sub(start) != tc.finalAfter {
					t.Errorf("record %s %q ended after %v, want %s %q after %v", meta.Status, meta.Name, meta.FinishedAt.Sub(start), tc.final, "job", tc.finalAfter)
				}
				if got := eventKinds(ib.Drain()); fmt.Sprint(got) != fmt.Sprint(tc.events) {
					t.Errorf("events = %v, want %v", got, tc.events)
				}
				if got := taskIDs(listTasks(t, o)); len(got) != 1 || got[0] != id {
					t.Errorf("list = %v, want the one record %s", got, id)
				}
				if n := runs.Load(); n != 1 {
					t.Errorf("the function ran %d times", n)
				}
				if m.reporting("alice", map[string]struct{}{}) {
					t.Error("an ended task is still pending for the plugin")
				}
			})
		})
	}
}

// A call whose function returns at the very moment its time is up gets
// exactly one of its result and the promotion, never both and never
// neither, and the owner hears of the end only when it was promoted.
func TestForegroundRaceAtTheLimit(t *testing.T) {
	t.Parallel()
	const d = time.Second
	synctest.Test(t, func(t *testing.T) {
		m := newTestManager(t)
		o := m.Owner("alice")
		ib, err := o.Inbox()
		if err != nil {
			t.Fatal(err)
		}
		outcomes := map[string]int{}
		for i := range 60 {
			offset := time.Duration(i%3-1) * time.Nanosecond // d-1ns, d, d+1ns
			res, err := o.Foreground(t.Context(), d, func(context.Context, *Task) (any, error) {
				<-time.After(d + offset)
				return i, nil
			})
			if err != nil {
				t.Fatalf("call %d: %v", i, err)
			}
			if _, err := o.Wait(t.Context(), res.TaskID); err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
			evs := ib.Drain()
			switch {
			case res.Promoted:
				if string(res.Result) != notice(res.TaskID, bgtype.StatusRunning, d) {
					t.Fatalf("call %d: notice %s", i, res.Result)
				}
				if len(evs) != 1 || evs[0].Kind != bgtype.EventCompleted || evs[0].TaskID != res.TaskID || string(evs[0].Result) != fmt.Sprint(i) {
					t.Fatalf("call %d promoted: events %+v, want its completion once", i, evs)
				}
				outcomes[fmt.Sprintf("promoted at %v", offset)]++
			case string(res.Result) == fmt.Sprint(i) && res.Status == bgtype.StatusCompleted:
				if len(evs) != 0 {
					t.Fatalf("call %d answered in the foreground: events %+v, want none", i, evs)
				}
				outcomes[fmt.Sprintf("result at %v", offset)]++
			default:
				t.Fatalf("call %d: neither result nor promotion: %+v", i, res)
			}
		}
		if outcomes["result at -1ns"] != 20 || outcomes["promoted at 1ns"] != 20 ||
			outcomes["result at 0s"]+outcomes["promoted at 0s"] != 20 {
			t.Errorf("outcomes = %v", outcomes)
		}
		t.Logf("outcomes: %v", outcomes)
	})
}

// The caller's context ends while the call is in the foreground (a client
// that hung up): the call is abandoned and Foreground returns the
// context's cause at once. By default the call is promoted: the function
// runs on untouched, and its end reaches the owner once, as a background
// task's. With WithCancelOnAbandon the task is cancelled with the reason
// "foreground call abandoned" (a function that ignores its context runs on
// until it returns), and its end is never announced.
func TestForegroundCallerCanceled(t *testing.T) {
	t.Parallel()
	errGone := errors.New("user pressed stop")
	for _, tc := range []struct {
		name      string
		cancel    bool // WithCancelOnAbandon
		honors    bool
		final     bgtype.Status
		endsAfter time.Duration
		events    []bgtype.EventKind
	}{
		{"promoted, function honours ctx", false, true, bgtype.StatusCompleted, time.Minute, []bgtype.EventKind{bgtype.EventCompleted}},
		{"promoted, function ignores ctx", false, false, bgtype.StatusCompleted, time.Minute, []bgtype.EventKind{bgtype.EventCompleted}},
		{"cancelled, function honours ctx", true, true, bgtype.StatusCanceled, time.Second, nil},
		{"cancelled, function ignores ctx", true, false, bgtype.StatusCompleted, time.Minute, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				m := newTestManager(t)
				o := m.Owner("alice")
				ib, err := o.Inbox()
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithCancelCause(t.Context())
				time.AfterFunc(time.Second, func() { cancel(errGone) })
				var opts []SpawnOption
				if tc.cancel {
					opts = append(opts, WithCancelOnAbandon())
				}
				start := time.Now()
				res, err := o.Foreground(ctx, 5*time.Second, func(ctx context.Context, _ *Task) (any, error) {
					select {
					case <-ctx.Done():
						if tc.honors {
							return nil, ctx.Err()
						}
					case <-time.After(time.Minute):
					}
					<-time.After(time.Minute - time.Since(start))
					return "done anyway", nil
				}, opts...)
				if err != errGone || time.Since(start) != time.Second {
					t.Fatalf("Foreground = %+v, %v after %v; want %v after 1s", res, err, time.Since(start), errGone)
				}
				if tc.cancel {
					if res.Promoted || res.Result != nil {
						t.Fatalf("Foreground = %+v, want no result", res)
					}
				} else if !res.Promoted || res.Status != bgtype.StatusRunning || string(res.Result) != notice(res.TaskID, bgtype.StatusRunning, time.Second) {
					t.Fatalf("Foreground = %+v (%s), want the promotion notice", res, res.Result)
				}
				meta := waitTask(t, o, res.TaskID)
				synctest.Wait()
				if meta.Status != tc.final || meta.FinishedAt.Sub(start) != tc.endsAfter {
					t.Errorf("record %s after %v, want %s after %v", meta.Status, meta.FinishedAt.Sub(start), tc.final, tc.endsAfter)
				}
				if tc.cancel && tc.honors && meta.CancelReason != "foreground call abandoned" {
					t.Errorf("cancel reason %q", meta.CancelReason)
				}
				if evs := ib.Drain(); !slices.Equal(eventKinds(evs), tc.events) {
					t.Errorf("events = %+v, want %v", evs, tc.events)
				}
			})
		})
	}
}

// A promoted task is a task like any other: a cancel of it reaches the
// function's context, and its end is announced once.
func TestForegroundPromotedThenCanceled(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		m := newTestManager(t)
		o := m.Owner("alice")
		p := newProbe()
		res, err := o.Foreground(t.Context(), time.Second, p.fn)
		if err != nil || !res.Promoted {
			t.Fatalf("Foreground = %+v, %v; want promoted", res, err)
		}
		if n, err := o.Cancel(t.Context(), res.TaskID, WithReason("not needed")); n != 1 || err != nil {
			t.Fatalf("Cancel = %d, %v", n, err)
		}
		if cause := <-p.cause; !errors.Is(cause, ErrCanceled) {
			t.Errorf("the function saw %v, want ErrCanceled", cause)
		}
		waitStatus(t, o, res.TaskID, bgtype.StatusCanceled)
		synctest.Wait()
		if got := drainKindIDs(t, m, "alice"); fmt.Sprint(got) != fmt.Sprint([]kindID{{bgtype.EventCanceled, res.TaskID}}) {
			t.Errorf("events = %v, want its cancellation once", got)
		}
	})
}

// A task that asks for input in the foreground is promoted at once: the
// model must answer it. From then on its input request and its end reach
// the owner.
func TestForegroundPromotedOnInputRequest(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		m := newTestManager(t)
		o := m.Owner("alice")
		ib, err := o.Inbox()
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		res, err := o.Foreground(t.Context(), time.Minute, func(ctx context.Context, tk *Task) (any, error) {
			<-time.After(time.Second)
			msg, err := tk.RequestInput(ctx, "which branch?")
			return msg.Content, err
		})
		if err != nil || !res.Promoted || res.Status != bgtype.StatusAwaitingInput || time.Since(start) != time.Second {
			t.Fatalf("Foreground = %+v, %v after %v; want promoted awaiting input after 1s", res, err, time.Since(start))
		}
		if string(res.Result) != notice(res.TaskID, bgtype.StatusAwaitingInput, time.Minute) {
			t.Errorf("notice = %s", res.Result)
		}
		req := getTask(t, o, res.TaskID).Input
		if _, err := o.Send(t.Context(), res.TaskID, bgtype.Message{Content: "main", InReplyTo: req.ID}); err != nil {
			t.Fatal(err)
		}
		meta := waitStatus(t, o, res.TaskID, bgtype.StatusCompleted)
		synctest.Wait()
		if string(meta.Result) != `"main"` {
			t.Errorf("result %s", meta.Result)
		}
		if got := eventKinds(ib.Drain()); fmt.Sprint(got) != fmt.Sprint([]bgtype.EventKind{bgtype.EventCompleted}) {
			t.Errorf("events = %v, want the completion", got)
		}
	})
}

// A spawn refused (closed Manager, concurrency limit without a queue, bad
// argument) starts nothing; Shutdown during the foreground cancels the
// function and the call returns an error matching ErrCanceled; with a
// queue, a call that waits for a slot past its time is promoted queued and
// runs once a slot frees.
func TestForegroundRefusedShutdownAndQueued(t *testing.T) {
	t.Parallel()
	never := func(context.Context, *Task) (any, error) { panic("must not run") }
	t.Run("refused", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			m := newTestManager(t, WithLimits(Limits{MaxConcurrentPerOwner: 1}))
			o := m.Owner("alice")
			_, p := spawnProbe(t, t.Context(), o)
			for _, tc := range []struct {
				name string
				o    Owner
				d    time.Duration
				want error
				text string
			}{
				{"limit full", o, time.Second, ErrLimit, "bgtask: concurrency limit reached"},
				{"negative time", m.Owner("bob"), -time.Second, ErrInvalidArgument, "bgtask: invalid argument: negative foreground time -1s"},
				{"blank owner", m.Owner(" "), time.Second, bgtype.ErrInvalidOwner, "bgtask: owner id is empty"},
			} {
				res, err := tc.o.Foreground(t.Context(), tc.d, never)
				if !errors.Is(err, tc.want) || !strings.HasPrefix(err.Error(), tc.text) || res.TaskID != "" {
					t.Errorf("%s: Foreground = %+v, %v; want %q", tc.name, res, err, tc.text)
				}
			}
			close(p.release)
			shutdownManager(t, m)
			res, err := o.Foreground(t.Context(), time.Second, never)
			if !errors.Is(err, ErrClosed) || res.TaskID != "" {
				t.Errorf("after Shutdown: %+v, %v; want ErrClosed", res, err)
			}
			if n := countRecords(t, m, "bob"); n != 0 {
				t.Errorf("bob has %d records", n)
			}
		})
	})
	t.Run("shutdown in the foreground", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			m := newTestManager(t)
			o := m.Owner("alice")
			ib, err := o.Inbox()
			if err != nil {
				t.Fatal(err)
			}
			time.AfterFunc(time.Second, func() { _ = m.Shutdown(context.Background()) })
			res, err := o.Foreground(t.Context(), time.Minute, func(ctx context.Context, _ *Task) (any, error) {
				<-ctx.Done()
				return nil, context.Cause(ctx)
			})
			if !errors.Is(err, ErrCanceled) || err.Error() != "bgtask: task "+res.TaskID+" cancelled: bgtask: manager shut down" || res.Promoted {
				t.Fatalf("Foreground = %+v, %v; want cancelled by the shutdown", res, err)
			}
			synctest.Wait()
			if evs := ib.Drain(); len(evs) != 0 {
				t.Errorf("events = %+v, want none", evs)
			}
		})
	})
	t.Run("queued", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			m := newTestManager(t, WithLimits(Limits{MaxConcurrentPerOwner: 1, QueueWhenFull: true}))
			o := m.Owner("alice")
			first, p := spawnProbe(t, t.Context(), o, WithWake(bgtype.WakeSilent))
			var runs atomic.Int32
			res, err := o.Foreground(t.Context(), time.Second, func(context.Context, *Task) (any, error) {
				runs.Add(1)
				return "ran", nil
			})
			if err != nil || !res.Promoted || res.Status != bgtype.StatusQueued || string(res.Result) != notice(res.TaskID, bgtype.StatusQueued, time.Second) {
				t.Fatalf("Foreground = %+v (%s), %v; want promoted queued", res, res.Result, err)
			}
			close(p.release)
			waitStatus(t, o, first, bgtype.StatusCompleted)
			meta := waitStatus(t, o, res.TaskID, bgtype.StatusCompleted)
			synctest.Wait()
			if string(meta.Result) != `"ran"` || runs.Load() != 1 {
				t.Errorf("result %s after %d runs", meta.Result, runs.Load())
			}
			if got := drainKindIDs(t, m, "alice"); fmt.Sprint(got) != fmt.Sprint([]kindID{{bgtype.EventCompleted, res.TaskID}}) {
				t.Errorf("events = %v, want the promoted call's completion once", got)
			}
		})
	})
}

// Events a function emits in the foreground are kept as its progress, not
// sent to the inbox; once promoted, they reach the inbox as its wake policy
// says.
func TestForegroundProgressHeldUntilPromoted(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		m := newTestManager(t)
		o := m.Owner("alice")
		ib, err := o.Inbox()
		if err != nil {
			t.Fatal(err)
		}
		res, err := o.Foreground(t.Context(), 2*time.Second, func(ctx context.Context, tk *Task) (any, error) {
			for i := range 4 {
				<-time.After(time.Second)
				if err := tk.Emit("progress", i); err != nil {
					return nil, err
				}
			}
			return "ok", nil
		}, WithWake(bgtype.WakeOnActivity))
		if err != nil || !res.Promoted {
			t.Fatalf("Foreground = %+v, %v", res, err)
		}
		waitStatus(t, o, res.TaskID, bgtype.StatusCompleted)
		synctest.Wait()
		var got []string
		for _, ev := range ib.Drain() {
			got = append(got, fmt.Sprintf("%s %s", ev.Kind, ev.Payload))
		}
		// Emitted at 1s and 2s in the foreground (the promotion at 2s may
		// come before or after the second), at 3s and 4s in the background.
		want := []string{"custom 2", "custom 3", "completed "}
		if len(got) == 4 {
			want = append([]string{"custom 1"}, want...)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("events = %q, want %q", got, want)
		}
	})
}

// A function that returns as its time is up, right after the call was
// promoted and before Foreground built the notice: the notice says the
// task goes on, so its status is the one the task had when promoted
// (running), not the completed that its record says a moment later; the
// end reaches the owner once, as an event.
func TestForegroundTieNoticeAgreesWithStatus(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const d = time.Second
		m := newTestManager(t)
		o := m.Owner("alice")
		ib, err := o.Inbox()
		if err != nil {
			t.Fatal(err)
		}
		release := make(chan struct{})
		hook := func(hm *Manager, id string) {
			if hm != m {
				return // another test's Manager
			}
			close(release)
			if _, err := m.Wait(context.Background(), id); err != nil { // its end is committed and announced
				t.Error(err)
			}
		}
		afterPromote.Store(&hook)
		defer afterPromote.Store(nil)
		res, err := o.Foreground(t.Context(), d, func(context.Context, *Task) (any, error) {
			<-release
			return "late", nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if !res.Promoted || res.Status != bgtype.StatusRunning || string(res.Result) != notice(res.TaskID, bgtype.StatusRunning, d) {
			t.Fatalf("Foreground = %+v, notice %s; want promoted with status running", res, res.Result)
		}
		if meta := getTask(t, o, res.TaskID); meta.Status != bgtype.StatusCompleted {
			t.Fatalf("record %s, want completed", meta.Status)
		}
		if evs := ib.Drain(); len(evs) != 1 || evs[0].Kind != bgtype.EventCompleted || evs[0].TaskID != res.TaskID {
			t.Fatalf("events %+v, want its completion once", evs)
		}
	})
}

// Foreground with the idempotency key of the owner's live background task
// joins it for d, no longer: the promotion notice at d (not when the task
// ends), then the task's end announced once; or, if it ends within d, its
// end as the result and no event. It never cancels the task, even when the
// caller's context ends, and the second function never runs.
func TestForegroundJoinsKeyedTask(t *testing.T) {
	for _, tc := range []struct {
		name     string
		ends     time.Duration // when the keyed task ends
		hangUp   bool          // the caller's ctx ends at 20ms
		took     time.Duration
		promoted bool
		err      bool
		events   []bgtype.EventKind // after the task ended
	}{
		{"ends after d", 10 * time.Second, false, 50 * time.Millisecond, true, false, []bgtype.EventKind{bgtype.EventCompleted}},
		{"ends within d", 30 * time.Millisecond, false, 30 * time.Millisecond, false, false, nil},
		{"caller gone", 10 * time.Second, true, 20 * time.Millisecond, false, true, []bgtype.EventKind{bgtype.EventCompleted}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const d = 50 * time.Millisecond
				ds := &durableMem{Store: memstore.New()}
				m := newTestManager(t, WithStore(ds))
				o := m.Owner("alice")
				ib, err := o.Inbox()
				if err != nil {
					t.Fatal(err)
				}
				id, err := o.Spawn(t.Context(), func(context.Context, *Task) (any, error) {
					<-time.After(tc.ends)
					return "first", nil
				}, WithIdempotencyKey("k"))
				if err != nil {
					t.Fatal(err)
				}
				ctx := t.Context()
				if tc.hangUp {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, 20*time.Millisecond)
					defer cancel()
				}
				var ran atomic.Bool
				start := time.Now()
				res, err := o.Foreground(ctx, d, func(context.Context, *Task) (any, error) {
					ran.Store(true)
					return "second", nil
				}, WithIdempotencyKey("k"))
				took := time.Since(start)
				if took != tc.took || res.TaskID != id || res.Promoted != tc.promoted || (err != nil) != tc.err {
					t.Fatalf("Foreground = %+v, %v after %v; want task %s promoted %v after %v", res, err, took, id, tc.promoted, tc.took)
				}
				switch {
				case tc.promoted:
					if res.Status != bgtype.StatusRunning || string(res.Result) != notice(id, bgtype.StatusRunning, d) {
						t.Fatalf("notice %s status %s", res.Result, res.Status)
					}
				case !tc.err:
					if res.Status != bgtype.StatusCompleted || string(res.Result) != `"first"` {
						t.Fatalf("result %s status %s, want the keyed task's", res.Result, res.Status)
					}
				}
				meta := waitTask(t, o, id)
				synctest.Wait()
				if meta.Status != bgtype.StatusCompleted || meta.FinishedAt.Sub(start) != tc.ends {
					t.Fatalf("the keyed task %s after %v, want completed after %v", meta.Status, meta.FinishedAt.Sub(start), tc.ends)
				}
				if evs := ib.Drain(); !slices.Equal(eventKinds(evs), tc.events) {
					t.Fatalf("events %+v, want %v", evs, tc.events)
				}
				if !tc.promoted && !tc.err {
					if got := getTask(t, o, id); !got.Announced {
						t.Fatal("the end given as the result is not marked announced")
					}
				}
				if ran.Load() {
					t.Fatal("the second function ran")
				}
			})
		})
	}
}

// The promotion notice is a JSON object every provider takes as a tool
// result: valid UTF-8 and JSON, the task id a JSON string, and the tools it
// names are among the agent package's tools.
func TestForegroundNoticeNamesRealTools(t *testing.T) {
	t.Parallel()
	for _, status := range []bgtype.Status{bgtype.StatusRunning, bgtype.StatusQueued, bgtype.StatusAwaitingInput} {
		meta := bgtype.TaskMeta{ID: "task_0123456789abcdef0123456789abcdef", Status: status}
		res := promoted(&meta, 1500*time.Millisecond)
		if !utf8.Valid(res.Result) || !json.Valid(res.Result) {
			t.Fatalf("%s: notice %q is not valid JSON", status, res.Result)
		}
		var n struct {
			Status, TaskID, TaskStatus, Message string
		}
		if err := json.Unmarshal(res.Result, &struct {
			Status     *string `json:"status"`
			TaskID     *string `json:"task_id"`
			TaskStatus *string `json:"task_status"`
			Message    *string `json:"message"`
		}{&n.Status, &n.TaskID, &n.TaskStatus, &n.Message}); err != nil {
			t.Fatal(err)
		}
		if n.Status != "promoted" || n.TaskID != meta.ID || n.TaskStatus != string(status) || !strings.Contains(n.Message, meta.ID) {
			t.Errorf("%s: notice %+v", status, n)
		}
		// The agent package's tools (its TestToolsOrderAndSchemas pins the names).
		tools := map[string]bool{"list_tasks": true, "get_task": true, "cancel_task": true, "send_message": true, "wait_task": true}
		for _, name := range []string{"wait_task", "get_task", "send_message"} {
			if strings.Contains(n.Message, name) != (name == "wait_task" || status == bgtype.StatusAwaitingInput) || !tools[name] {
				t.Errorf("%s: message %q and tool %s (a tool: %v)", status, n.Message, name, tools[name])
			}
		}
	}
}
