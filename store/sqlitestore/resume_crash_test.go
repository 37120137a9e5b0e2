//go:build unix

package sqlitestore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/agent"
	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"
	"github.com/bgtask/bgtask/store/sqlitestore"
)

// resumeChild is what a child in mode "resume" does: it opens the file
// (recovery at open requeues what a killed process left), runs a Manager
// that registers the kind "steps/v1" (or, with Other, only "other/v1"),
// spawns Spawn (each a steps/v1 task) and, with Plain, two closures (one
// that completes, one that blocks), and prints "spawned <ids as JSON>".
// With Cancel it cancels that task and prints "cancelled <n>". With Final
// it opens a Plugin run for Owner first, waits until every record of Owner
// is terminal, and prints "events <the terminal events its Plugin
// delivered, as JSON>" and "records <the records as JSON>"; otherwise it
// waits until it is killed (by itself, at a crash point of a step), or,
// with a yield step, until its Stop returns ("stopped").
//
// A steps/v1 task runs steps Next..Steps of its spec from its checkpoint
// (Next, the first step still to run): each step appends the line "<id>
// <step> <record attempt> <Task.Attempt> <instance> <StepKey>" to the
// effects file (synced before it goes on: the effect is done), then saves
// the checkpoint Next = step+1. CrashAfterEffect and CrashAfterSave name
// the step after whose effect, or whose save, the process kills itself
// with SIGKILL, on the first CrashAttempts attempts; YieldAt the step
// after whose save the child stops its Manager, and the task yields;
// BlockAt the step before whose effect the task prints "at <id>" and
// blocks (on its first attempt).
type resumeChild struct {
	Effects        string      `json:"effects,omitempty"`
	Spawn          []stepsSpec `json:"spawn,omitempty"`
	Plain          bool        `json:"plain,omitempty"`
	Other          bool        `json:"other,omitempty"`
	UnclaimedAfter time.Duration
	Cancel         string `json:"cancel,omitempty"`
	Final          bool   `json:"final,omitempty"`
	Shared         bool   `json:"shared,omitempty"` // another process serves the owner too: it reports the records it ran, and hears only their ends
}

type stepsSpec struct {
	Steps            int `json:"steps"`
	CrashAfterEffect int `json:"crash_after_effect,omitempty"`
	CrashAfterSave   int `json:"crash_after_save,omitempty"`
	CrashAttempts    int `json:"crash_attempts,omitempty"`
	YieldAt          int `json:"yield_at,omitempty"`
	BlockAt          int `json:"block_at,omitempty"`
}

type stepsCursor struct {
	Next int `json:"next"`
}

func childResume(cfg childConfig, out *lineWriter) error {
	ctx := context.Background()
	rc := cfg.Resume
	st, err := childOpen(ctx, cfg, out)
	if err != nil {
		return err
	}
	defer st.Close()
	effects, err := os.OpenFile(rc.Effects, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer effects.Close()
	stop := make(chan struct{}, 1)
	printed := make(chan struct{}) // closed once "spawned" is out: no step kills the process before
	steps, err := bgtask.NewKind("steps/v1", func(ctx context.Context, t *bgtask.Task, spec stepsSpec, cp *bgtask.Checkpoint[stepsCursor]) (any, error) {
		<-printed
		last, _ := cp.Last()
		attempt := t.Attempt()
		rec, err := st.Get(ctx, t.ID())
		if err != nil {
			return nil, err
		}
		for step := max(last.Next, 1); step <= spec.Steps; step++ {
			if step == spec.BlockAt && attempt == 1 {
				out.printf("at %s", t.ID())
				<-ctx.Done()
				return nil, ctx.Err()
			}
			line := fmt.Sprintf("%s %d %d %d %s %s\n", t.ID(), step, rec.Attempt, attempt, cfg.Instance, t.StepKey(fmt.Sprint("step-", step)))
			if _, err := effects.WriteString(line); err != nil {
				return nil, err
			}
			if err := effects.Sync(); err != nil {
				return nil, err
			}
			if step == spec.CrashAfterEffect && attempt <= spec.CrashAttempts {
				syscall.Kill(os.Getpid(), syscall.SIGKILL)
				select {}
			}
			if err := cp.Save(ctx, stepsCursor{Next: step + 1}); err != nil {
				return nil, err
			}
			if step == spec.CrashAfterSave && attempt <= spec.CrashAttempts {
				syscall.Kill(os.Getpid(), syscall.SIGKILL)
				select {}
			}
			if step == spec.YieldAt && attempt == 1 {
				stop <- struct{}{}
				<-t.Draining()
				return nil, bgtask.ErrYield
			}
		}
		return map[string]int{"steps": spec.Steps}, nil
	}, bgtask.KindConfig{})
	if err != nil {
		return err
	}
	other, err := bgtask.NewKind("other/v1", func(context.Context, *bgtask.Task, struct{}, *bgtask.Checkpoint[struct{}]) (any, error) {
		return nil, nil
	}, bgtask.KindConfig{UnclaimedAfter: rc.UnclaimedAfter})
	if err != nil {
		return err
	}
	opts := []bgtask.Option{bgtask.WithStore(st), bgtask.WithInstance(cfg.Instance)}
	switch {
	case rc.Other:
		opts = append(opts, bgtask.WithKinds(other))
	case rc.Cancel == "":
		opts = append(opts, bgtask.WithKinds(steps))
	}
	m, err := bgtask.New(opts...)
	if err != nil {
		return err
	}
	defer m.Shutdown(ctx)
	o := m.Owner(cfg.Owner)
	var p *agent.Plugin
	if rc.Final {
		if p, err = agent.NewPlugin(m, cfg.Owner, agent.Config{}); err != nil {
			return err
		}
		if err := p.RunStart(ctx, bgtask.RunInfo{RunID: "run-" + cfg.Instance}); err != nil {
			return err
		}
	}
	ids := []string{}
	for _, spec := range rc.Spawn {
		id, err := steps.Spawn(ctx, o, spec)
		if err != nil {
			return err
		}
		ids = append(ids, id)
	}
	if rc.Plain {
		id, err := o.Spawn(ctx, func(context.Context, *bgtask.Task) (any, error) { return "plain", nil })
		if err != nil {
			return err
		}
		if _, err := o.Wait(ctx, id); err != nil {
			return err
		}
		blocked, err := o.Spawn(ctx, func(ctx context.Context, _ *bgtask.Task) (any, error) { <-ctx.Done(); return nil, ctx.Err() })
		if err != nil {
			return err
		}
		ids = append(ids, id, blocked)
	}
	js, _ := json.Marshal(ids)
	out.printf("spawned %s", js)
	close(printed)
	if rc.Cancel != "" {
		n, err := o.Cancel(ctx, rc.Cancel)
		if err != nil {
			return err
		}
		out.printf("cancelled %d", n)
		return m.Shutdown(ctx)
	}
	if !rc.Final {
		select {
		case <-stop:
			sctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			if err := m.Stop(sctx); err != nil {
				return err
			}
			out.printf("stopped")
			return nil
		case <-ctx.Done(): // killed meanwhile
			return nil
		}
	}
	// Until every record is terminal (Shared: until this process ran its
	// share and none waits to be claimed; the other runs the rest): it
	// claims what waits and waits for what runs here, on the Manager's
	// notifications, rather than reading the store in a loop.
	var recs []bgtype.TaskMeta
claims:
	for {
		recs = recs[:0]
		var live []string
		waiting := false
		for meta, err := range st.List(ctx, cfg.Owner) {
			if err != nil {
				return err
			}
			if !rc.Shared || meta.Instance == cfg.Instance {
				recs = append(recs, meta)
			}
			if !meta.Status.IsTerminal() {
				live = append(live, meta.ID)
			}
			// waiting, or being claimed here (the claim loop committed it and
			// is starting it): a next pass waits for it
			waiting = waiting || store.Waiting(&meta) || !meta.Status.IsTerminal() && meta.Instance == cfg.Instance
		}
		if len(live) == 0 {
			break claims
		}
		if _, err := m.ClaimWaiting(ctx); err != nil {
			return err
		}
		waited := false
		for _, id := range live {
			if _, err := m.Wait(ctx, id); !errors.Is(err, bgtask.ErrNotLive) {
				waited = true // it ran here, or ended meanwhile
			}
		}
		switch {
		case waited || waiting:
		case rc.Shared:
			break claims // what is left runs in the other process
		default:
			return fmt.Errorf("records %v are live and nothing here runs them", live)
		}
	}
	// Every end is handed out, but not always by the time its record is
	// terminal (a Manager that ends a record it does not run tells the
	// owner after its commit): deliver until each record's end came (the
	// ends of the records this process ran, when Shared), and a last time,
	// to see any second one.
	evs := []bgtype.Event{}
	heard := map[string]bool{}
	for {
		last := len(heard) == len(recs)
		if !last {
			if err := p.WaitEvent(ctx); err != nil {
				return err
			}
		}
		msgs, err := p.Deliver(ctx)
		if err != nil {
			return err
		}
		for _, msg := range msgs {
			if msg.Event != nil && msg.Event.Kind.IsTerminal() {
				evs = append(evs, *msg.Event)
				heard[msg.Event.TaskID] = true
			}
		}
		if last {
			break
		}
	}
	if err := p.RunEnd(ctx, bgtask.RunOutcome{RunID: "run-" + cfg.Instance}); err != nil {
		return err
	}
	e, _ := json.Marshal(evs)
	out.printf("events %s", e)
	r, _ := json.Marshal(recs)
	out.printf("records %s", r)
	return m.Shutdown(ctx)
}

// resumeRig is one scenario's file, effects and owner.
type resumeRig struct {
	t       *testing.T
	db      string
	effects string
	owner   string
	lives   int
}

func newResumeRig(t *testing.T) *resumeRig {
	dir := t.TempDir()
	return &resumeRig{t: t, db: filepath.Join(dir, "tasks.db"), effects: filepath.Join(dir, "effects"), owner: "thread-1"}
}

// start starts a life of the scenario.
func (r *resumeRig) start(rc resumeChild) *child {
	r.t.Helper()
	r.lives++
	rc.Effects = r.effects
	return startChild(r.t, fmt.Sprintf("life %d", r.lives), childConfig{Mode: "resume", DB: r.db, Owner: r.owner, Instance: fmt.Sprintf("life-%d", r.lives), Resume: rc})
}

// killed waits for c to die by SIGKILL.
func (r *resumeRig) killed(c *child) {
	r.t.Helper()
	c.stdin.Close()
	err := c.cmd.Wait()
	c.done = true
	if ws, ok := c.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		r.t.Fatalf("%s ended with %v, want killed by SIGKILL (stderr: %s)", c.name, err, c.stderr.String())
	}
}

// final runs the last life: it resumes what is left, and returns the
// terminal events its Plugin delivered and the records.
func (r *resumeRig) final(rc resumeChild) ([]bgtype.Event, map[string]bgtype.TaskMeta) {
	r.t.Helper()
	rc.Final = true
	c := r.start(rc)
	c.expect("spawned", nil)
	var evs []bgtype.Event
	unmarshal(r.t, "events", c.expect("events", nil), &evs)
	var recs []bgtype.TaskMeta
	unmarshal(r.t, "records", c.expect("records", nil), &recs)
	c.wait()
	byID := map[string]bgtype.TaskMeta{}
	for _, m := range recs {
		byID[m.ID] = m
	}
	return evs, byID
}

// effectLines returns the effects file's lines of task id, as "<step>
// <record attempt> <Task.Attempt>".
func (r *resumeRig) effectLines(id string) []string {
	r.t.Helper()
	b, err := os.ReadFile(r.effects)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		r.t.Fatal(err)
	}
	var out []string
	for l := range strings.Lines(string(b)) {
		f := strings.Fields(l)
		if f[0] == id {
			out = append(out, strings.Join(f[1:4], " "))
		}
	}
	return out
}

func eventsOf(evs []bgtype.Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, string(e.Kind)+" "+e.TaskID)
	}
	slices.Sort(out)
	return out
}

// TestResumeCrash: kill -9 in the middle of a resumable task's steps;
// the next process resumes it from its checkpoint, and counts are exact:
// how many times each step ran, how many attempts, how many events.
func TestResumeCrash(t *testing.T) {
	t.Parallel()

	t.Run("after a checkpoint", func(t *testing.T) {
		r := newResumeRig(t)
		c := r.start(resumeChild{Spawn: []stepsSpec{{Steps: 4, CrashAfterSave: 2, CrashAttempts: 1}}, Plain: true})
		var ids []string
		unmarshal(t, "spawned", c.expect("spawned", nil), &ids)
		r.killed(c)
		kind, plain, blocked := ids[0], ids[1], ids[2]
		evs, recs := r.final(resumeChild{})
		// steps 1 and 2 ran once, on attempt 1; 3 and 4 once, on attempt 2
		if got := r.effectLines(kind); fmt.Sprint(got) != "[1 1 1 2 1 1 3 2 2 4 2 2]" {
			t.Fatalf("effects %q", got)
		}
		k := recs[kind]
		if k.Status != bgtype.StatusCompleted || k.Attempt != 2 || string(k.Result) != `{"steps":4}` || string(k.Resume.Checkpoint) != `{"next":5}` || k.Resume.SavedBy != 2 ||
			k.Resume.LastError != `the runtime that ran it (instance "life-1") is gone` || k.Resume.ResumedAt.IsZero() || k.Instance != "life-2" {
			t.Fatalf("kind record %+v %+v", k, k.Resume)
		}
		// each task ends once, heard once; the resumed one was never interrupted
		want := []string{"completed " + kind, "completed " + plain, "interrupted " + blocked}
		slices.Sort(want)
		if got := eventsOf(evs); !slices.Equal(got, want) {
			t.Fatalf("events %q, want %q", got, want)
		}
		// the closures are as before: no resume field, not re-run
		b, _ := json.Marshal(recs[plain])
		if strings.Contains(string(b), "resume") || recs[plain].Attempt != 0 {
			t.Fatalf("plain record %s", b)
		}
		if got := recs[blocked]; got.Error != `bgtask: interrupted: the runtime that ran it (instance "life-1") is gone; it will not be re-run` || got.Attempt != 1 || got.Resume != nil {
			t.Fatalf("blocked closure %+v", got)
		}
	})

	t.Run("after an effect before its checkpoint", func(t *testing.T) {
		r := newResumeRig(t)
		c := r.start(resumeChild{Spawn: []stepsSpec{{Steps: 4, CrashAfterEffect: 3, CrashAttempts: 1}}})
		var ids []string
		unmarshal(t, "spawned", c.expect("spawned", nil), &ids)
		r.killed(c)
		evs, recs := r.final(resumeChild{})
		// step 3 ran twice (at least once between checkpoints), with one step key
		if got := r.effectLines(ids[0]); fmt.Sprint(got) != "[1 1 1 2 1 1 3 1 1 3 2 2 4 2 2]" {
			t.Fatalf("effects %q", got)
		}
		if k := recs[ids[0]]; k.Status != bgtype.StatusCompleted || k.Attempt != 2 {
			t.Fatalf("record %+v", k)
		}
		if got := eventsOf(evs); fmt.Sprint(got) != "[completed "+ids[0]+"]" {
			t.Fatalf("events %q", got)
		}
	})

	t.Run("crashes its process every attempt", func(t *testing.T) {
		r := newResumeRig(t)
		c := r.start(resumeChild{Spawn: []stepsSpec{{Steps: 2, CrashAfterEffect: 1, CrashAttempts: 99}}})
		var ids []string
		unmarshal(t, "spawned", c.expect("spawned", nil), &ids)
		r.killed(c)
		for range 2 { // attempts 2 and 3 crash too
			r.killed(r.start(resumeChild{}))
		}
		evs, recs := r.final(resumeChild{})
		if got := r.effectLines(ids[0]); fmt.Sprint(got) != "[1 1 1 1 2 2 1 3 3]" {
			t.Fatalf("effects %q", got)
		}
		k := recs[ids[0]]
		want := `bgtask: interrupted: gave up after 3 attempts (kind steps/v1): the runtime that ran it (instance "life-3") is gone`
		if k.Status != bgtype.StatusInterrupted || k.Error != want || k.Attempt != 4 {
			t.Fatalf("record %q %+v", k.Error, k)
		}
		if got := eventsOf(evs); fmt.Sprint(got) != "[interrupted "+ids[0]+"]" {
			t.Fatalf("events %q", got)
		}
	})

	t.Run("a deploy with a yield", func(t *testing.T) {
		r := newResumeRig(t)
		c := r.start(resumeChild{Spawn: []stepsSpec{{Steps: 4, YieldAt: 2}}})
		var ids []string
		unmarshal(t, "spawned", c.expect("spawned", nil), &ids)
		if l := c.line(); l != "stopped" {
			t.Fatalf("line %q, want stopped", l)
		}
		c.wait()
		evs, recs := r.final(resumeChild{})
		// the yield cost no attempt: the second life's attempt is still the first counted
		if got := r.effectLines(ids[0]); fmt.Sprint(got) != "[1 1 1 2 1 1 3 2 1 4 2 1]" {
			t.Fatalf("effects %q", got)
		}
		if k := recs[ids[0]]; k.Status != bgtype.StatusCompleted || k.Attempt != 2 || k.Resume.Yields != 1 {
			t.Fatalf("record %+v %+v", k, k.Resume)
		}
		if got := eventsOf(evs); fmt.Sprint(got) != "[completed "+ids[0]+"]" {
			t.Fatalf("events %q", got)
		}
	})

	t.Run("a kind nobody registers", func(t *testing.T) {
		r := newResumeRig(t)
		c := r.start(resumeChild{Spawn: []stepsSpec{{Steps: 2, CrashAfterSave: 1, CrashAttempts: 1}}})
		var ids []string
		unmarshal(t, "spawned", c.expect("spawned", nil), &ids)
		r.killed(c)
		evs, recs := r.final(resumeChild{Other: true, UnclaimedAfter: time.Millisecond})
		if got := r.effectLines(ids[0]); fmt.Sprint(got) != "[1 1 1]" {
			t.Fatalf("effects %q", got)
		}
		k := recs[ids[0]]
		if k.Status != bgtype.StatusFailed || !strings.HasPrefix(k.Error, "bgtask: no runtime registered kind steps/v1: the task waited ") {
			t.Fatalf("record %q %+v", k.Error, k)
		}
		if got := eventsOf(evs); fmt.Sprint(got) != "[failed "+ids[0]+"]" {
			t.Fatalf("events %q", got)
		}
	})

	t.Run("a cancel between attempts", func(t *testing.T) {
		r := newResumeRig(t)
		c := r.start(resumeChild{Spawn: []stepsSpec{{Steps: 2, CrashAfterSave: 1, CrashAttempts: 1}}})
		var ids []string
		unmarshal(t, "spawned", c.expect("spawned", nil), &ids)
		r.killed(c)
		c = r.start(resumeChild{Cancel: ids[0]})
		c.expect("spawned", nil)
		if n := c.expect("cancelled", nil); n != "1" {
			t.Fatalf("cancelled %s", n)
		}
		c.wait()
		evs, recs := r.final(resumeChild{})
		if got := r.effectLines(ids[0]); fmt.Sprint(got) != "[1 1 1]" {
			t.Fatalf("effects %q", got)
		}
		if k := recs[ids[0]]; k.Status != bgtype.StatusCanceled || k.Attempt != 2 || k.Instance == "" { // ended on the attempt that waited, by the cancelling process
			t.Fatalf("record %+v", k)
		}
		// the cancelling process told its owner (not announced: nobody took it); the last life does, once
		if got := eventsOf(evs); fmt.Sprint(got) != "[cancelled "+ids[0]+"]" {
			t.Fatalf("events %q", got)
		}
	})

	t.Run("two processes claim many", func(t *testing.T) {
		const n = 20
		r := newResumeRig(t)
		specs := make([]stepsSpec, n)
		for i := range specs {
			specs[i] = stepsSpec{Steps: 3, BlockAt: 2}
		}
		c := r.start(resumeChild{Spawn: specs})
		var ids []string
		at := 0
		countAt := func(l string) {
			if !strings.HasPrefix(l, "at ") {
				t.Fatalf("line %q", l)
			}
			at++
		}
		unmarshal(t, "spawned", c.expect("spawned", countAt), &ids)
		for ; at < n; at++ {
			c.expect("at", nil)
		}
		if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		r.killed(c)
		a, b := r.start(resumeChild{Final: true, Shared: true}), r.start(resumeChild{Final: true, Shared: true})
		var recs []bgtype.TaskMeta
		for _, c := range []*child{a, b} {
			c.expect("spawned", nil)
			c.expect("events", nil)
			var got []bgtype.TaskMeta
			unmarshal(t, "records", c.expect("records", nil), &got)
			recs = append(recs, got...)
			c.wait()
		}
		if len(recs) != n { // each process reports the records it ran
			t.Fatalf("%d records reported, want %d", len(recs), n)
		}
		byInstance := map[string]int{}
		for _, m := range recs {
			if m.Status != bgtype.StatusCompleted || m.Attempt != 2 {
				t.Fatalf("record %+v", m)
			}
			byInstance[m.Instance]++
		}
		for _, id := range ids { // each claimed once: steps 2 and 3 ran once each, on attempt 2
			if got := r.effectLines(id); fmt.Sprint(got) != "[1 1 1 2 2 2 3 2 2]" {
				t.Fatalf("effects of %s: %q", id, got)
			}
		}
		t.Logf("claims: %v", byInstance)
	})
}

var _ = sqlitestore.Open
