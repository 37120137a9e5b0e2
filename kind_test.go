package bgtask

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bgtask/bgtask/bgtype"
)

type crawlSpec struct {
	URL   string `json:"url"`
	Pages int    `json:"pages"`
}

type crawlCursor struct {
	Page int `json:"page"`
}

// newKind makes a kind or fails the test.
func newKind(t testing.TB, name string, fn KindFunc[crawlSpec, crawlCursor], cfg KindConfig) *Kind[crawlSpec, crawlCursor] {
	t.Helper()
	k, err := NewKind(name, fn, cfg)
	if err != nil {
		t.Fatalf("NewKind(%s): %v", name, err)
	}
	return k
}

func TestNewKindRefuses(t *testing.T) {
	t.Parallel()
	fn := func(context.Context, *Task, crawlSpec, *Checkpoint[crawlCursor]) (any, error) { return nil, nil }
	for _, tc := range []struct {
		name string
		fn   KindFunc[crawlSpec, crawlCursor]
		cfg  KindConfig
		want string
	}{
		{"crawl", fn, KindConfig{}, `bgtask: invalid argument: kind name "crawl" is not a versioned path such as "crawl/v1"`},
		{"Crawl/v1", fn, KindConfig{}, `bgtask: invalid argument: kind name "Crawl/v1" is not a versioned path such as "crawl/v1"`},
		{"crawl/v1", nil, KindConfig{}, `bgtask: invalid argument: kind crawl/v1: nil function`},
		{"crawl/v1", fn, KindConfig{Retry: RetryPolicy{MaxAttempts: 101}}, `bgtask: invalid argument: kind crawl/v1: MaxAttempts 101 not in 0..100`},
		{"crawl/v1", fn, KindConfig{MaxSpecBytes: -1}, `bgtask: invalid argument: kind crawl/v1: negative setting`},
	} {
		_, err := NewKind(tc.name, tc.fn, tc.cfg)
		if !errors.Is(err, ErrInvalidArgument) || err.Error() != tc.want {
			t.Errorf("NewKind(%q) = %v, want %s", tc.name, err, tc.want)
		}
	}
	k := newKind(t, "crawl/v1", fn, KindConfig{})
	if _, err := New(WithKinds(k, k)); !errors.Is(err, ErrInvalidArgument) || err.Error() != "bgtask: invalid argument: WithKinds: kind crawl/v1 registered twice" {
		t.Fatalf("New(WithKinds(k, k)) = %v", err)
	}
}

func TestKindSpawnPersistsSpec(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	k := newKind(t, "crawl/v1", func(ctx context.Context, tk *Task, s crawlSpec, cp *Checkpoint[crawlCursor]) (any, error) {
		<-release
		return s.Pages, nil
	}, KindConfig{MaxSpecBytes: 64})
	m := newTestManager(t, WithKinds(k))
	o := m.Owner("thread-1")
	id, err := k.Spawn(t.Context(), o, crawlSpec{URL: "https://x", Pages: 3})
	if err != nil {
		t.Fatalf("Spawn: %v", err)
	}
	meta := getTask(t, m, id)
	want := bgtype.Resume{Kind: "crawl/v1", Spec: json.RawMessage(`{"url":"https://x","pages":3}`), MaxAttempts: 3}
	if meta.Resume == nil || !meta.Resume.Equal(&want) || meta.Attempt != 1 || meta.Status != bgtype.StatusRunning {
		t.Fatalf("record = %+v, resume %+v", meta, meta.Resume)
	}
	close(release)
	if got := waitStatus(t, o, id, bgtype.StatusCompleted); string(got.Result) != "3" {
		t.Fatalf("result %s", got.Result)
	}

	// Over the cap: refused, nothing stored.
	big := crawlSpec{URL: strings.Repeat("u", 100)}
	if _, err := k.Spawn(t.Context(), o, big); !errors.Is(err, ErrTooLarge) || err.Error() != "bgtask: too large: kind crawl/v1: spec of 120 bytes, the cap is 64" {
		t.Fatalf("Spawn(big) = %v", err)
	}
	if n := countRecords(t, m, "thread-1"); n != 1 {
		t.Fatalf("%d records after a refused spawn, want 1", n)
	}
	// A Manager that was not given the kind refuses it.
	other := newTestManager(t)
	if _, err := k.Spawn(t.Context(), other.Owner("thread-1"), crawlSpec{}); !errors.Is(err, ErrKindNotRegistered) {
		t.Fatalf("Spawn on a Manager without the kind = %v", err)
	}
}

func TestPlainSpawnRecordHasNoResume(t *testing.T) {
	t.Parallel()
	m := newTestManager(t)
	id := spawnFor(t, m, "thread-1", func(context.Context, *Task) (any, error) { return "ok", nil })
	meta := waitStatus(t, m, id, bgtype.StatusCompleted)
	b, err := json.Marshal(meta)
	if err != nil {
		t.Fatal(err)
	}
	if meta.Resume != nil || strings.Contains(string(b), "resume") || meta.Attempt != 0 {
		t.Fatalf("closure record %s", b)
	}
}

// TestKindRetryBackoff: an attempt that fails is retried after 1s, then
// 2s; the third succeeds; the owner hears one end.
func TestKindRetryBackoff(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var starts []time.Duration
		var attempts []int
		t0 := time.Now()
		k := newKind(t, "crawl/v1", func(ctx context.Context, tk *Task, s crawlSpec, cp *Checkpoint[crawlCursor]) (any, error) {
			starts = append(starts, time.Since(t0))
			attempts = append(attempts, tk.Attempt())
			if len(starts) < 3 {
				return nil, fmt.Errorf("flaky %d", len(starts))
			}
			return "done", nil
		}, KindConfig{})
		m := newTestManager(t, WithKinds(k))
		o := m.Owner("thread-1")
		id, err := k.Spawn(t.Context(), o, crawlSpec{})
		if err != nil {
			t.Fatal(err)
		}
		meta := waitStatus(t, o, id, bgtype.StatusCompleted)
		if fmt.Sprint(starts) != "[0s 1s 3s]" || fmt.Sprint(attempts) != "[1 2 3]" {
			t.Fatalf("attempts at %v numbered %v", starts, attempts)
		}
		if meta.Attempt != 3 || meta.Resume.LastError != "flaky 2" {
			t.Fatalf("record attempt %d, last error %q", meta.Attempt, meta.Resume.LastError)
		}
		if evs := drainOwner(t, o); fmt.Sprint(eventKinds(evs)) != "[completed]" {
			t.Fatalf("events %v", eventKinds(evs))
		}
	})
}

// TestKindExhausted: every attempt fails; the backoff is capped; one end
// whose error names the attempts.
func TestKindExhausted(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var starts []time.Duration
		t0 := time.Now()
		k := newKind(t, "crawl/v1", func(ctx context.Context, tk *Task, s crawlSpec, cp *Checkpoint[crawlCursor]) (any, error) {
			starts = append(starts, time.Since(t0))
			return nil, errors.New("boom")
		}, KindConfig{Retry: RetryPolicy{MaxAttempts: 4, InitialBackoff: 2 * time.Second, MaxBackoff: 3 * time.Second}})
		m := newTestManager(t, WithKinds(k))
		o := m.Owner("thread-1")
		id, _ := k.Spawn(t.Context(), o, crawlSpec{})
		meta := waitStatus(t, o, id, bgtype.StatusFailed)
		if fmt.Sprint(starts) != "[0s 2s 5s 8s]" {
			t.Fatalf("attempts at %v", starts)
		}
		if meta.Error != "gave up after 4 attempts (kind crawl/v1): boom" || meta.Attempt != 4 {
			t.Fatalf("error %q attempt %d", meta.Error, meta.Attempt)
		}
		if evs := drainOwner(t, o); fmt.Sprint(eventKinds(evs)) != "[failed]" {
			t.Fatalf("events %v", eventKinds(evs))
		}
	})
}

func TestKindPermanentAndRetryable(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		k := newKind(t, "crawl/v1", func(ctx context.Context, tk *Task, s crawlSpec, cp *Checkpoint[crawlCursor]) (any, error) {
			calls++
			if s.Pages == 1 {
				return nil, Permanent(errors.New("bad url"))
			}
			return nil, errors.New("404")
		}, KindConfig{Retry: RetryPolicy{Retryable: func(err error) bool { return err.Error() != "404" }}})
		m := newTestManager(t, WithKinds(k))
		o := m.Owner("thread-1")
		id, _ := k.Spawn(t.Context(), o, crawlSpec{Pages: 1})
		if meta := waitStatus(t, o, id, bgtype.StatusFailed); meta.Error != "bad url" || calls != 1 {
			t.Fatalf("permanent: %q after %d calls", meta.Error, calls)
		}
		id, _ = k.Spawn(t.Context(), o, crawlSpec{Pages: 2})
		if meta := waitStatus(t, o, id, bgtype.StatusFailed); meta.Error != "404" || calls != 2 {
			t.Fatalf("not retryable: %q after %d calls", meta.Error, calls)
		}
	})
}

// TestKindCancelDuringBackoff: a cancel while the task waits for its next
// attempt ends it at once, cancelled.
func TestKindCancelDuringBackoff(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		k := newKind(t, "crawl/v1", func(ctx context.Context, tk *Task, s crawlSpec, cp *Checkpoint[crawlCursor]) (any, error) {
			calls++
			return nil, errors.New("boom")
		}, KindConfig{Retry: RetryPolicy{InitialBackoff: time.Hour}})
		m := newTestManager(t, WithKinds(k))
		o := m.Owner("thread-1")
		id, _ := k.Spawn(t.Context(), o, crawlSpec{})
		synctest.Wait() // attempt 1 failed; the task waits out its backoff
		t0 := time.Now()
		if _, err := o.Cancel(t.Context(), id); err != nil {
			t.Fatal(err)
		}
		meta := waitStatus(t, o, id, bgtype.StatusCanceled)
		if time.Since(t0) != 0 || calls != 1 || meta.Attempt != 2 {
			t.Fatalf("cancelled after %v, %d calls, attempt %d", time.Since(t0), calls, meta.Attempt)
		}
		if evs := drainOwner(t, o); fmt.Sprint(eventKinds(evs)) != "[cancelled]" {
			t.Fatalf("events %v", eventKinds(evs))
		}
	})
}

// TestKindCheckpoint: a save is on the record when it returns; the next
// attempt starts from it; an oversized one is refused and changes nothing;
// the step key is the same in every attempt.
func TestKindCheckpoint(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var seen []string
		var keys []string
		var m *Manager
		k := newKind(t, "crawl/v1", func(ctx context.Context, tk *Task, s crawlSpec, cp *Checkpoint[crawlCursor]) (any, error) {
			last, ok := cp.Last()
			seen = append(seen, fmt.Sprintf("%d/%v", last.Page, ok))
			keys = append(keys, tk.StepKey("page-3"))
			for p := last.Page + 1; p <= s.Pages; p++ {
				if err := cp.Save(ctx, crawlCursor{Page: p}); err != nil {
					return nil, err
				}
				rec := getTask(t, m, tk.ID())
				if string(rec.Resume.Checkpoint) != fmt.Sprintf(`{"page":%d}`, p) || rec.Resume.SavedBy != rec.Attempt {
					t.Errorf("after Save(%d): %s by %d", p, rec.Resume.Checkpoint, rec.Resume.SavedBy)
				}
				if p == 2 && tk.Attempt() == 1 {
					return nil, errors.New("crashed on page 3")
				}
			}
			return "crawled", nil
		}, KindConfig{MaxCheckpointBytes: 12})
		m = newTestManager(t, WithKinds(k))
		o := m.Owner("thread-1")
		id, _ := k.Spawn(t.Context(), o, crawlSpec{Pages: 4})
		meta := waitStatus(t, o, id, bgtype.StatusCompleted)
		if fmt.Sprint(seen) != "[0/false 2/true]" || keys[0] != keys[1] || keys[0] != id+"/page-3" {
			t.Fatalf("attempts started from %v, keys %v", seen, keys)
		}
		if string(meta.Resume.Checkpoint) != `{"page":4}` || meta.Resume.SavedBy != 2 {
			t.Fatalf("final checkpoint %s by %d", meta.Resume.Checkpoint, meta.Resume.SavedBy)
		}

		big := newKind(t, "big/v1", func(ctx context.Context, tk *Task, s crawlSpec, cp *Checkpoint[crawlCursor]) (any, error) {
			return nil, cp.Save(ctx, crawlCursor{Page: 1_000_000_000})
		}, KindConfig{MaxCheckpointBytes: 12, Retry: RetryPolicy{MaxAttempts: 1}})
		m2 := newTestManager(t, WithKinds(big))
		id, _ = big.Spawn(t.Context(), m2.Owner("o"), crawlSpec{})
		got := waitStatus(t, m2, id, bgtype.StatusFailed)
		if got.Error != "bgtask: too large: checkpoint of 19 bytes, the cap is 12" || got.Resume.Checkpoint != nil {
			t.Fatalf("oversized save: %q, checkpoint %s", got.Error, got.Resume.Checkpoint)
		}
	})
}

// TestKindStopYield: Stop closes Draining; a task that saves and yields
// goes back to the queue on a new attempt that costs nothing, and its
// owner hears nothing; a closure beside it ends as before.
func TestKindStopYield(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		k := newKind(t, "crawl/v1", func(ctx context.Context, tk *Task, s crawlSpec, cp *Checkpoint[crawlCursor]) (any, error) {
			<-tk.Draining()
			if err := cp.Save(ctx, crawlCursor{Page: 7}); err != nil {
				return nil, err
			}
			return nil, ErrYield
		}, KindConfig{})
		m, err := New(WithKinds(k))
		if err != nil {
			t.Fatal(err)
		}
		o := m.Owner("thread-1")
		id, _ := k.Spawn(t.Context(), o, crawlSpec{})
		plain := spawnFor(t, m, "thread-1", func(ctx context.Context, tk *Task) (any, error) {
			<-tk.Draining()
			return "wound down", nil
		})
		if err := m.Stop(t.Context()); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		meta := getTask(t, m, id)
		if meta.Status != bgtype.StatusQueued || meta.Attempt != 2 || meta.Resume.Yields != 1 || meta.Instance != "" ||
			meta.Resume.Counted(meta.Attempt) != 1 || string(meta.Resume.Checkpoint) != `{"page":7}` ||
			meta.Resume.LastError != fmt.Sprintf("its runtime (instance %q) stopped for a deploy", m.Instance()) {
			t.Fatalf("yielded record %+v %+v", meta, meta.Resume)
		}
		if got := getTask(t, m, plain); got.Status != bgtype.StatusCompleted {
			t.Fatalf("closure %s", got.Status)
		}
		evs := drainOwner(t, o)
		if len(evs) != 1 || evs[0].TaskID != plain || evs[0].Kind != bgtype.EventCompleted {
			t.Fatalf("events %+v", evs)
		}
	})
}

// TestKindStopCut: a task that ignores the drain is requeued at Stop's
// deadline (not interrupted); its later Save fails with ErrSuperseded and
// changes nothing.
func TestKindStopCut(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		saved := make(chan error, 1)
		proceed := make(chan struct{})
		k := newKind(t, "crawl/v1", func(ctx context.Context, tk *Task, s crawlSpec, cp *Checkpoint[crawlCursor]) (any, error) {
			<-proceed
			saved <- cp.Save(context.Background(), crawlCursor{Page: 9})
			return "late", nil
		}, KindConfig{})
		m, err := New(WithKinds(k))
		if err != nil {
			t.Fatal(err)
		}
		o := m.Owner("thread-1")
		id, _ := k.Spawn(t.Context(), o, crawlSpec{})
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		var se *ShutdownError
		if err := m.Stop(ctx); !errors.As(err, &se) || fmt.Sprint(se.Interrupted) != "["+id+"]" {
			t.Fatalf("Stop = %v", err)
		}
		close(proceed)
		err = <-saved
		if !errors.Is(err, ErrSuperseded) || err.Error() != "bgtask: attempt superseded: a newer attempt of the task took over (attempt 1; the record is on attempt 2, queued)" {
			t.Fatalf("late Save = %v", err)
		}
		if err := m.Shutdown(t.Context()); err != nil {
			t.Fatal(err)
		}
		meta := getTask(t, m, id)
		if meta.Status != bgtype.StatusQueued || meta.Attempt != 2 || meta.Resume.Checkpoint != nil || meta.Result != nil {
			t.Fatalf("record after a late save and return: %+v %+v", meta, meta.Resume)
		}
		if evs := drainOwner(t, o); len(evs) != 0 {
			t.Fatalf("events %+v", evs)
		}
	})
}
