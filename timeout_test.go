package bgtask

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bgtask/bgtask/internal/memstore"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/internal/clock"
	"github.com/bgtask/bgtask/store"
)

// Each way a task ends gives its status and kind (none for completed and
// cancelled: cancelled is a status, not a kind).
func TestErrorKinds(t *testing.T) {
	for _, tc := range []struct {
		name      string
		opts      []SpawnOption
		fn        Func
		cancelAt  time.Duration // cancel the task after this much fake time; 0 never
		status    bgtype.Status
		kind      bgtype.ErrorKind
		errText   string
		took      time.Duration
		waitIsErr bool
	}{
		{"function error", nil, func(context.Context, *Task) (any, error) { return nil, errors.New("disk full") },
			0, bgtype.StatusFailed, bgtype.KindError, "disk full", 0, true},
		{"panic", nil, func(context.Context, *Task) (any, error) { panic("boom") },
			0, bgtype.StatusFailed, bgtype.KindPanic, "panic: boom", 0, true},
		{"deadline", nil, blockOnCtx, // WithDeadline(3s after the bubble's start), set below
			0, bgtype.StatusFailed, bgtype.KindTimeout, "bgtask: task timed out: its deadline passed", 3 * time.Second, true},
		{"own error after the timeout", []SpawnOption{WithTimeout(2 * time.Second)}, func(ctx context.Context, _ *Task) (any, error) {
			<-ctx.Done()
			return nil, errors.New("gave up")
		}, 0, bgtype.StatusFailed, bgtype.KindTimeout, "gave up", 2 * time.Second, true},
		{"a value after the timeout", []SpawnOption{WithTimeout(2 * time.Second)}, func(ctx context.Context, _ *Task) (any, error) {
			<-ctx.Done()
			return "partial", nil
		}, 0, bgtype.StatusCompleted, "", "", 2 * time.Second, false},
		{"cancelled before the timeout", []SpawnOption{WithTimeout(time.Hour)}, blockOnCtx,
			time.Second, bgtype.StatusCanceled, "", "bgtask: task cancelled", time.Second, false},
		{"done before the timeout", []SpawnOption{WithTimeout(time.Hour)}, func(context.Context, *Task) (any, error) { return 1, nil },
			0, bgtype.StatusCompleted, "", "", 0, false},
		{"a later WithTimeout wins", []SpawnOption{WithDeadline(time.Now().Add(time.Hour)), WithTimeout(time.Second)}, blockOnCtx,
			0, bgtype.StatusFailed, bgtype.KindTimeout, "bgtask: task timed out after 1s", time.Second, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				opts := tc.opts // a deadline is a time in the bubble
				if tc.name == "deadline" {
					opts = []SpawnOption{WithDeadline(time.Now().Add(3 * time.Second))}
				}
				m := newTestManager(t)
				o := m.Owner("alice")
				id, err := o.Spawn(t.Context(), tc.fn, opts...)
				if err != nil {
					t.Fatal(err)
				}
				if tc.cancelAt > 0 {
					<-time.After(tc.cancelAt) // fake time, in the bubble
					if n, err := o.Cancel(t.Context(), id); n != 1 || err != nil {
						t.Fatalf("Cancel = %d, %v", n, err)
					}
				}
				meta, err := o.Wait(t.Context(), id)
				if (err != nil) != tc.waitIsErr || err != nil && !isTaskError(err) {
					t.Fatalf("Wait error = %v, want a *TaskError: %v", err, tc.waitIsErr)
				}
				if meta.Status != tc.status || meta.ErrorKind != tc.kind || meta.Error != tc.errText {
					t.Errorf("record = %s/%q/%q, want %s/%q/%q", meta.Status, meta.ErrorKind, meta.Error, tc.status, tc.kind, tc.errText)
				}
				if took := meta.FinishedAt.Sub(meta.CreatedAt); took != tc.took {
					t.Errorf("ended after %v, want %v", took, tc.took)
				}
				if errors.Is(err, ErrTimeout) != (tc.kind == bgtype.KindTimeout) {
					t.Errorf("errors.Is(%v, ErrTimeout) = %v", err, !(tc.kind == bgtype.KindTimeout))
				}
			})
		})
	}
}

func blockOnCtx(ctx context.Context, _ *Task) (any, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func TestTimeoutOptionsRefuseBadValues(t *testing.T) {
	m := newTestManager(t)
	o := m.Owner("alice")
	for _, tc := range []struct {
		opt  SpawnOption
		want string
	}{
		{WithTimeout(0), "bgtask: invalid argument: timeout 0s is not positive"},
		{WithTimeout(-time.Second), "bgtask: invalid argument: timeout -1s is not positive"},
		{WithDeadline(time.Time{}), "bgtask: invalid argument: deadline is zero"},
	} {
		if _, err := o.Spawn(t.Context(), doneTask, tc.opt); !errors.Is(err, ErrInvalidArgument) || err.Error() != tc.want {
			t.Errorf("Spawn = %v, want %q", err, tc.want)
		}
	}
}

// Restore marks what it interrupts with the kind "interrupted".
func TestRestoreSetsKindInterrupted(t *testing.T) {
	st := memstore.New()
	old := bgtype.TaskMeta{ID: "task_old", Owner: "a", Type: bgtype.TypeTask, Status: bgtype.StatusRunning, CreatedAt: clock.Now(), Instance: "inst_old"}
	if err := st.Commit(t.Context(), "a", store.UpsertAction(old)); err != nil {
		t.Fatal(err)
	}
	m := newTestManager(t, WithStore(st))
	if _, err := m.Restore(t.Context(), "a"); err != nil {
		t.Fatal(err)
	}
	meta, err := m.Wait(t.Context(), "task_old")
	if err != nil || meta.Status != bgtype.StatusInterrupted || meta.ErrorKind != bgtype.KindInterrupted {
		t.Fatalf("Wait = %s/%q, %v; want interrupted/interrupted with no error", meta.Status, meta.ErrorKind, err)
	}
}
