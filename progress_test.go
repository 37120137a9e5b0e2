package bgtask

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bgtask/bgtask/internal/memstore"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"
)

// progressStore is a Store that records the progress-only commits (an
// upsert without a status carrying progress) the Manager makes.
type progressStore struct {
	*memstore.Store
	mu     sync.Mutex
	writes []bgtype.Progress
}

func (s *progressStore) Commit(ctx context.Context, owner string, actions ...store.Action) error {
	s.mu.Lock()
	for _, a := range actions {
		for _, m := range a.Tasks {
			if m.Status == "" && m.Progress != nil {
				s.writes = append(s.writes, *m.Progress)
			}
		}
	}
	s.mu.Unlock()
	return s.Store.Commit(ctx, owner, actions...)
}

func (s *progressStore) written() []bgtype.Progress {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]bgtype.Progress(nil), s.writes...)
}

// The reducer keeps a record's progress: a live record takes a newer one
// from any update (with or without a status) and keeps its own when the
// update has none or an older one; a terminal record keeps the one it has
// and takes one only when it has none; progress never moves the status.
func TestApplyProgress(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	p := func(done int64, sec int) *bgtype.Progress {
		return &bgtype.Progress{Done: done, Total: 10, Message: "m", At: t0.Add(time.Duration(sec) * time.Second)}
	}
	rec := func(st bgtype.Status, pr *bgtype.Progress) bgtype.TaskMeta {
		return bgtype.TaskMeta{ID: "task_1", Owner: "o", Status: st, Progress: pr, Description: "d"}
	}
	for _, tc := range []struct {
		name       string
		cur, u     bgtype.TaskMeta
		wantStatus bgtype.Status
		want       *bgtype.Progress
	}{
		{"live, first progress", rec(bgtype.StatusRunning, nil), rec("", p(1, 1)), bgtype.StatusRunning, p(1, 1)},
		{"live, newer", rec(bgtype.StatusRunning, p(1, 1)), rec("", p(2, 2)), bgtype.StatusRunning, p(2, 2)},
		{"live, older dropped", rec(bgtype.StatusRunning, p(2, 2)), rec("", p(1, 1)), bgtype.StatusRunning, p(2, 2)},
		{"live, same time replaces", rec(bgtype.StatusRunning, p(2, 2)), rec("", p(3, 2)), bgtype.StatusRunning, p(3, 2)},
		{"live, none keeps", rec(bgtype.StatusRunning, p(2, 2)), rec(bgtype.StatusRunning, nil), bgtype.StatusRunning, p(2, 2)},
		{"queued stays queued", rec(bgtype.StatusQueued, nil), rec("", p(1, 1)), bgtype.StatusQueued, p(1, 1)},
		{"awaiting input stays", bgtype.TaskMeta{ID: "task_1", Owner: "o", Status: bgtype.StatusAwaitingInput, Input: &bgtype.InputRequest{ID: "input_1", Prompt: "?"}}, rec("", p(1, 1)), bgtype.StatusAwaitingInput, p(1, 1)},
		{"terminal with the last", rec(bgtype.StatusRunning, p(1, 1)), rec(bgtype.StatusCompleted, p(5, 5)), bgtype.StatusCompleted, p(5, 5)},
		{"terminal with an older one keeps", rec(bgtype.StatusRunning, p(5, 5)), rec(bgtype.StatusCompleted, p(1, 1)), bgtype.StatusCompleted, p(5, 5)},
		{"terminal keeps its own", rec(bgtype.StatusCompleted, p(5, 5)), rec("", p(6, 6)), bgtype.StatusCompleted, p(5, 5)},
		{"terminal without is filled", rec(bgtype.StatusFailed, nil), rec("", p(6, 6)), bgtype.StatusFailed, p(6, 6)},
		{"another status on terminal dropped", rec(bgtype.StatusCanceled, nil), rec(bgtype.StatusCompleted, p(6, 6)), bgtype.StatusCanceled, nil},
		{"fenced attempt dropped", bgtype.TaskMeta{ID: "task_1", Owner: "o", Status: bgtype.StatusRunning, Attempt: 2}, bgtype.TaskMeta{ID: "task_1", Owner: "o", Progress: p(1, 1), Attempt: 1}, bgtype.StatusRunning, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := store.Snapshot{Tasks: map[string]bgtype.TaskMeta{"task_1": tc.cur}}
			store.Apply(&s, store.UpsertAction(tc.u))
			got := s.Tasks["task_1"]
			if got.Status != tc.wantStatus || !sameProgress(got.Progress, tc.want) {
				t.Fatalf("status %s, progress %+v; want %s, %+v", got.Status, got.Progress, tc.wantStatus, tc.want)
			}
			if tc.cur.Input != nil && (got.Input == nil || *got.Input != *tc.cur.Input) {
				t.Fatalf("input request %+v, want %+v", got.Input, tc.cur.Input)
			}
			if tc.u.Progress != nil && got.Progress == tc.u.Progress {
				t.Fatal("the snapshot shares the update's progress")
			}
		})
	}
	// A record with impossible progress is refused.
	for _, bad := range []bgtype.Progress{{Done: -1}, {Total: -1}, {Done: 3, Total: 2}} {
		err := store.ValidateCommit("o", store.UpsertAction(bgtype.TaskMeta{ID: "task_1", Owner: "o", Status: bgtype.StatusRunning, Progress: &bad}))
		if !errors.Is(err, store.ErrInvalidAction) || !errors.Is(err, bgtype.ErrCorrupt) || !strings.Contains(err.Error(), "invalid progress") {
			t.Errorf("ValidateCommit with progress %+v: %v", bad, err)
		}
	}
}

// ReportProgress refuses impossible counts, cuts the message, emits a
// progress event and refuses once the function has returned.
func TestReportProgressArguments(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, WithCaps(Caps{MaxMessageBytes: 40}))
	o := m.Owner("alice")
	var errs []error
	var task *Task
	id, err := o.Spawn(t.Context(), func(ctx context.Context, tk *Task) (any, error) {
		task = tk
		for _, c := range [][2]int64{{-1, 0}, {0, -1}, {11, 10}, {10, 10}, {12, 0}} {
			errs = append(errs, tk.ReportProgress(c[0], c[1], strings.Repeat("ünïcödé <b>", 4)))
		}
		return nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := o.Wait(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"bgtask: invalid argument: progress -1 of 0: need 0 <= done and, with a total, done <= total",
		"bgtask: invalid argument: progress 0 of -1: need 0 <= done and, with a total, done <= total",
		"bgtask: invalid argument: progress 11 of 10: need 0 <= done and, with a total, done <= total",
		"", "",
	}
	for i, err := range errs {
		got := ""
		if err != nil {
			got = err.Error()
			if !errors.Is(err, ErrInvalidArgument) {
				t.Errorf("call %d: %v does not match ErrInvalidArgument", i, err)
			}
		}
		if got != want[i] {
			t.Errorf("call %d: %q, want %q", i, got, want[i])
		}
	}
	if p := rec.Progress; p == nil || p.Done != 12 || p.Total != 0 || p.Message != "ünïcöd…[truncated: 60 bytes total]" {
		t.Errorf("record progress %+v", p)
	}
	if err := task.ReportProgress(1, 2, ""); !errors.Is(err, errTaskEnded) {
		t.Errorf("ReportProgress after the end: %v, want ErrTerminal", err)
	}
	shutdownManager(t, m)
}

// The record is written at most once per interval, off the task's
// goroutine: the first report at once, later ones in one trailing write
// when the interval has passed, and the last one with the terminal record.
// With interval 0 every report is written, one write at a time.
func TestProgressThrottle(t *testing.T) {
	t.Parallel()
	type report struct {
		after time.Duration // wait before this report
		done  int64
	}
	every := func(n int, gap time.Duration) []report {
		var rs []report
		for i := range n {
			rs = append(rs, report{gap * time.Duration(min(i, 1)), int64(i + 1)})
		}
		return rs
	}
	for _, tc := range []struct {
		name     string
		interval time.Duration
		reports  []report
		linger   time.Duration // wait after the last report before returning
		want     []int64       // Done of each progress-only write, in order
	}{
		{"one report", time.Second, every(1, 0), 0, []int64{1}},
		{"burst, then the end", time.Second, every(5, 0), 0, []int64{1}},
		{"burst, then the interval", time.Second, every(5, 0), 1500 * time.Millisecond, []int64{1, 5}},
		{"steady, 300ms apart", time.Second, every(10, 300*time.Millisecond), 2 * time.Second, []int64{1, 4, 7, 10}},
		{"slower than the interval", time.Second, every(3, 2*time.Second), 0, []int64{1, 2, 3}},
		{"negative interval: every report", -1, every(5, time.Millisecond), 0, []int64{1, 2, 3, 4, 5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st := &progressStore{Store: memstore.New()}
				m, err := New(WithStore(st), WithTuning(Tuning{ProgressInterval: tc.interval}))
				if err != nil {
					t.Fatal(err)
				}
				o := m.Owner("alice")
				id, err := o.Spawn(t.Context(), func(ctx context.Context, tk *Task) (any, error) {
					for _, r := range tc.reports {
						if r.after > 0 {
							<-time.After(r.after)
						}
						if err := tk.ReportProgress(r.done, 0, "step"); err != nil {
							return nil, err
						}
					}
					if tc.linger > 0 {
						<-time.After(tc.linger)
					}
					return "ok", nil
				})
				if err != nil {
					t.Fatal(err)
				}
				rec, err := o.Wait(t.Context(), id)
				if err != nil {
					t.Fatal(err)
				}
				var got []int64
				for _, p := range st.written() {
					got = append(got, p.Done)
				}
				if !slices.Equal(got, tc.want) {
					t.Errorf("progress writes %v, want %v", got, tc.want)
				}
				last := tc.reports[len(tc.reports)-1].done
				if rec.Status != bgtype.StatusCompleted || rec.Progress == nil || rec.Progress.Done != last {
					t.Errorf("terminal record: status %s, progress %+v; want completed with %d", rec.Status, rec.Progress, last)
				}
				if err := m.Shutdown(t.Context()); err != nil {
					t.Fatal(err)
				}
			})
		})
	}
}

func sameProgress(a, b *bgtype.Progress) bool {
	return a == b || a != nil && b != nil && a.Done == b.Done && a.Total == b.Total && a.Message == b.Message && a.At.Equal(b.At)
}
