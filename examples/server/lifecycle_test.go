package main

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// At -max-threads 2 a third thread evicts the least recently used idle one
// (its Plugin closed) while that thread's research runs; the research ends
// before or after the eviction, and the evicted thread's next turn (a new
// Plugin) hears its end exactly once.
func TestEvictionHearsOnce(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		endBefore bool // the research ends before the eviction (its end kept by the first Plugin)
	}{
		{"ends after the eviction", false},
		{"ends before the eviction", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			model, url := newModel(t)
			srv, _ := sqliteServer(t, url, "-max-threads", "2")
			gate := model.holdResearch("evicted")
			id := startedTask(t, srv.mustPost(t, "e1", "research evicted in 1 step"), "evicted")
			<-gate.reached
			if tc.endBefore {
				close(gate.release)
				srv.waitWake(t, "e1", id, "completed")
			}
			srv.mustPost(t, "e2", "hello")
			if tt := srv.tasks(t, "e1"); !tt.Live {
				t.Fatalf("e1 before the third thread: %+v; want live", tt)
			}
			srv.mustPost(t, "e3", "hello") // evicts e1, used longest ago
			srv.waitLine(t, "the eviction of e1", func(l logLine) bool { return l.str("msg") == "evict" && l.str("thread") == "e1" })
			if tt := srv.tasks(t, "e1"); tt.Live || !srv.tasks(t, "e2").Live || !srv.tasks(t, "e3").Live {
				t.Fatalf("after the third thread: e1 %+v; want e1 evicted, e2 and e3 live", tt)
			}
			if !tc.endBefore {
				close(gate.release)
				srv.waitLine(t, "the research's end", func(l logLine) bool {
					return l.str("msg") == "task" && l.str("task_id") == id && l.str("to") == "completed"
				})
			}
			res := srv.mustPost(t, "e1", "back again") // a new Plugin; evicts e2
			if got, want := ends(t, res), []string{"completed " + id}; !slices.Equal(got, want) {
				t.Errorf("e1's turn after the eviction: ends %q, want %q", got, want)
			}
			if got := ends(t, srv.mustPost(t, "e1", "and again")); len(got) != 0 {
				t.Errorf("e1's next turn: ends %q, want none (each end once)", got)
			}
			if tt := srv.tasks(t, "e2"); tt.Live {
				t.Errorf("e2 after e1 came back: live; want evicted (least recently used)")
			}
			if st := statuses(srv.tasks(t, "e1")); !maps1(st, id, "completed") {
				t.Errorf("e1's tasks %v, want only %s completed", st, id)
			}
		})
	}
}

// wakesAtStart counts the wake lines the server logged at start
// (WithOnPendingOwner), per thread.
func wakesAtStart(p *proc) map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]int{}
	for _, l := range p.lines {
		if l.str("msg") == "wake" && l["at_start"] == true {
			out[l.str("thread")]++
		}
	}
	return out
}

// waitWakeAtStart waits for the wake line of thread logged at start.
func (p *proc) waitWakeAtStart(t *testing.T, thread string) {
	t.Helper()
	p.waitLine(t, "the wake at start of "+thread, func(l logLine) bool {
		return l.str("msg") == "wake" && l["at_start"] == true && l.str("thread") == thread
	})
}

// SIGTERM while a research is held: the server stops (Manager.Stop) within
// -stop-grace. A research still running at the deadline ends interrupted,
// and one that ends within the grace completes; either way the restarted
// server wakes the thread at start, and the thread hears the end once, the
// interrupted one with the shutdown's text.
func TestStopOnSIGTERM(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, grace string
		release     bool // the test lets the research end once the stop began
		kind        string
	}{
		{"cut at the deadline", "0s", false, "interrupted"},
		{"ends within the grace", "1h", true, "completed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			model, url := newModel(t)
			db := filepath.Join(t.TempDir(), "tasks.db")
			args := []string{"-db", db, "-openai-url", url, "-stop-grace", tc.grace}
			srv := startServer(t, args...)
			gate := model.holdResearch("stopped")
			id := startedTask(t, srv.mustPost(t, "g", "research stopped in 1 step"), "stopped")
			<-gate.reached
			if err := srv.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			srv.waitLine(t, "the stop", func(l logLine) bool { return l.str("msg") == "stopping" })
			if tc.release {
				close(gate.release)
			}
			srv.waitLine(t, "the server's end", func(l logLine) bool { return l.str("msg") == "server stopped" })
			<-srv.exited
			if code := srv.cmd.ProcessState.ExitCode(); code != 0 {
				t.Fatalf("the server exited with status %d:\n%s", code, srv.tail())
			}
			srv.waitWake(t, "g", id, tc.kind) // the live thread heard it, between turns

			srv = startServer(t, args...)
			srv.waitWakeAtStart(t, "g")
			res := srv.mustPost(t, "g", "after the restart")
			if got, want := ends(t, res), []string{tc.kind + " " + id}; !slices.Equal(got, want) {
				t.Fatalf("g after the restart: ends %q, want %q", got, want)
			}
			const shutText = "shut down before it ended"
			var ev event
			for _, raw := range res.Events {
				if err := json.Unmarshal(raw, &ev); err == nil && ev.TaskID == id {
					break
				}
			}
			tasks := srv.tasks(t, "g").Tasks
			if len(tasks) != 1 || string(tasks[0].Status) != tc.kind {
				t.Fatalf("g's tasks %+v, want %s %s", tasks, id, tc.kind)
			}
			if interrupted := tc.kind == "interrupted"; interrupted != strings.Contains(ev.Error, shutText) ||
				interrupted != strings.Contains(tasks[0].Error, shutText) {
				t.Errorf("the end's error %q, the record's %q; want %q in both: %v", ev.Error, tasks[0].Error, shutText, interrupted)
			}
			if got := ends(t, srv.mustPost(t, "g", "once more")); len(got) != 0 {
				t.Errorf("g, the turn after: ends %q, want none", got)
			}
			srv.stop(t)
			if got := wakesAtStart(srv); got["g"] != 1 || len(got) != 1 {
				t.Errorf("wakes at start %v, want g once", got)
			}
		})
	}
}

// A thread nobody used for -idle-timeout is evicted (its Plugin closed, an
// "evict" line with "idle": true) while its research runs; the research
// ends after the eviction, and the thread's next turn (a new Plugin) hears
// its end exactly once.
func TestIdleEvictionHearsOnce(t *testing.T) {
	t.Parallel()
	model, url := newModel(t)
	srv, _ := sqliteServer(t, url, "-idle-timeout", "1ms")
	gate := model.holdResearch("idle")
	id := startedTask(t, srv.mustPost(t, "i1", "research idle in 1 step"), "idle")
	<-gate.reached
	srv.waitLine(t, "the idle eviction of i1", func(l logLine) bool {
		return l.str("msg") == "evict" && l.str("thread") == "i1" && l["idle"] == true
	})
	if tt := srv.tasks(t, "i1"); tt.Live {
		t.Fatalf("i1 after its idle eviction: %+v; want not live", tt)
	}
	close(gate.release)
	srv.waitLine(t, "the research's end", func(l logLine) bool {
		return l.str("msg") == "task" && l.str("task_id") == id && l.str("to") == "completed"
	})
	if got, want := ends(t, srv.mustPost(t, "i1", "back again")), []string{"completed " + id}; !slices.Equal(got, want) {
		t.Errorf("i1's turn after the eviction: ends %q, want %q", got, want)
	}
	if got := ends(t, srv.mustPost(t, "i1", "and again")); len(got) != 0 {
		t.Errorf("i1's next turn: ends %q, want none (each end once)", got)
	}
}

// -idle-timeout: 0 is never (negative for the registry); negative is refused.
func TestIdleTimeoutFlag(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		arg  string
		want time.Duration
		err  bool
	}{
		{"", 30 * time.Minute, false},
		{"-idle-timeout=5m", 5 * time.Minute, false},
		{"-idle-timeout=0", -1, false},
		{"-idle-timeout=-1s", 0, true},
	} {
		var args []string
		if tc.arg != "" {
			args = append(args, tc.arg)
		}
		var stderr strings.Builder
		cfg, err := parseFlags(args, &stderr)
		if (err != nil) != tc.err || !tc.err && cfg.idleTimeout != tc.want {
			t.Errorf("%q: %v, %v; want %v (error %v)", tc.arg, cfg.idleTimeout, err, tc.want, tc.err)
		}
		if tc.err && !strings.Contains(stderr.String(), "-idle-timeout must not be negative") {
			t.Errorf("%q: stderr %q", tc.arg, stderr.String())
		}
	}
}
