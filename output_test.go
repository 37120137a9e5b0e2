package bgtask

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// outputTask returns a task function that writes each piece it receives on
// pieces to its output, acknowledging each on done, and returns when pieces
// is closed.
func outputTask(pieces <-chan string, done chan<- error) Func {
	return func(ctx context.Context, tk *Task) (any, error) {
		for {
			select {
			case p, ok := <-pieces:
				if !ok {
					return "ok", nil
				}
				_, err := io.WriteString(tk.Output(), p)
				done <- err
			case <-ctx.Done(): // a test that failed early
				return nil, ctx.Err()
			}
		}
	}
}

// writer is a task of o that writes what the test hands it.
type writer struct {
	id     string
	pieces chan string
	done   chan error
}

func spawnWriter(t *testing.T, o Owner, opts ...SpawnOption) *writer {
	t.Helper()
	w := &writer{pieces: make(chan string), done: make(chan error)}
	id, err := o.Spawn(t.Context(), outputTask(w.pieces, w.done), opts...)
	if err != nil {
		t.Fatal(err)
	}
	w.id = id
	return w
}

func (w *writer) write(t *testing.T, s string) {
	t.Helper()
	w.pieces <- s
	if err := <-w.done; err != nil {
		t.Fatalf("Write %q: %v", s, err)
	}
}

func readOutput(t *testing.T, o Owner, id string, from int64, limit int) Output {
	t.Helper()
	out, err := o.ReadOutput(t.Context(), id, from, limit)
	if err != nil {
		t.Fatalf("ReadOutput(%d, %d): %v", from, limit, err)
	}
	return out
}

// The buffer keeps the last MaxOutputBytes bytes: offsets count every byte
// written, the dropped ones are counted, and a reader that goes on from
// NextOffset sees each kept byte once, in order.
func TestOutputBoundedWithStableOffsets(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, WithCaps(Caps{MaxOutputBytes: 16}))
	o := m.Owner("alice")
	w := spawnWriter(t, o)
	w.write(t, "0123456789")
	if got := readOutput(t, o, w.id, 0, 100); got != (Output{Text: "0123456789", Offset: 0, NextOffset: 10, Size: 10}) {
		t.Fatalf("first read: %+v", got)
	}
	w.write(t, "abcdefghij") // 20 written, 16 kept: 0-3 dropped
	if got := readOutput(t, o, w.id, 0, 100); got != (Output{Text: "456789abcdefghij", Offset: 4, NextOffset: 20, Dropped: 4, Size: 20}) {
		t.Fatalf("after the overflow, from 0: %+v", got)
	}
	if got := readOutput(t, o, w.id, 10, 2); got != (Output{Text: "abcd", Offset: 10, NextOffset: 14, Size: 20}) {
		t.Fatalf("from 10, 2 bytes (4 at least): %+v", got)
	}
	w.write(t, strings.Repeat("x", 40)+"END") // larger than the buffer: its last 16 bytes kept
	if got := readOutput(t, o, w.id, 14, 100); got != (Output{Text: strings.Repeat("x", 13) + "END", Offset: 47, NextOffset: 63, Dropped: 33, Size: 63}) {
		t.Fatalf("after a write larger than the buffer: %+v", got)
	}
	if got := readOutput(t, o, w.id, 1000, 100); got != (Output{Offset: 63, NextOffset: 63, Size: 63}) {
		t.Fatalf("beyond the end: %+v", got)
	}
	close(w.pieces)
	if _, err := o.Wait(t.Context(), w.id); err != nil {
		t.Fatal(err)
	}
	if got := readOutput(t, o, w.id, 60, 100); got != (Output{Text: "END", Offset: 60, NextOffset: 63, Size: 63, Done: true}) {
		t.Fatalf("after the end: %+v", got)
	}
	if _, err := o.ReadOutput(t.Context(), w.id, -1, 10); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("negative offset: %v", err)
	}
	if _, err := m.Owner("bob").ReadOutput(t.Context(), w.id, 0, 10); !errors.Is(err, ErrNotFound) {
		t.Fatalf("another owner's task: %v", err)
	}
	shutdownManager(t, m)
}

// Read in increments across the ring's wrap and its growth, the pieces
// join into exactly what was kept.
func TestOutputIncrementsJoin(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, WithCaps(Caps{MaxOutputBytes: 1000}))
	o := m.Owner("alice")
	w := spawnWriter(t, o)
	var all strings.Builder
	var seen strings.Builder
	next := int64(0)
	for i := range 200 {
		p := fmt.Sprintf("line %d\n", i)
		w.write(t, p)
		all.WriteString(p)
		if i%7 == 0 { // a reader that keeps up, 13 bytes at a time
			for {
				out := readOutput(t, o, w.id, next, 13)
				if out.Dropped != 0 || out.Offset != next {
					t.Fatalf("read from %d: %+v", next, out)
				}
				seen.WriteString(out.Text)
				next = out.NextOffset
				if next == out.Size {
					break
				}
			}
		}
	}
	if seen.String() != all.String()[:next] {
		t.Fatalf("the pieces read differ from what was written")
	}
	tail, err := o.TailOutput(t.Context(), w.id, 9)
	if err != nil || tail.Text != "line 199\n" || tail.NextOffset != int64(all.Len()) {
		t.Fatalf("TailOutput: %+v, %v", tail, err)
	}
	close(w.pieces)
	shutdownManager(t, m)
}

// A UTF-8 character is never cut in two while the task runs: its first
// bytes wait for the rest; a character the drop cut is skipped whole.
func TestOutputKeepsCharactersWhole(t *testing.T) {
	t.Parallel()
	m := newTestManager(t, WithCaps(Caps{MaxOutputBytes: 8}))
	o := m.Owner("alice")
	w := spawnWriter(t, o)
	e := "é" // 2 bytes
	w.write(t, "ab"+e[:1])
	if got := readOutput(t, o, w.id, 0, 10); got != (Output{Text: "ab", NextOffset: 2, Size: 3}) {
		t.Fatalf("half a character: %+v", got)
	}
	w.write(t, e[1:])
	if got := readOutput(t, o, w.id, 2, 10); got != (Output{Text: e, Offset: 2, NextOffset: 4, Size: 4}) {
		t.Fatalf("the character whole: %+v", got)
	}
	w.write(t, "€€") // 6 bytes: 10 written, 8 kept from offset 2, the é whole
	w.write(t, "z")  // 11 written, 8 kept from offset 3: the second byte of é
	if got := readOutput(t, o, w.id, 0, 100); got != (Output{Text: "€€z", Offset: 4, NextOffset: 11, Dropped: 4, Size: 11}) {
		t.Fatalf("a character cut by the drop: %+v", got)
	}
	close(w.pieces)
	shutdownManager(t, m)
}

// WaitOutput returns on new output, on the end, and at ctx's end with its
// cause; a write after the end fails with ErrTerminal.
func TestWaitOutput(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		m := newTestManager(t)
		o := m.Owner("alice")
		w := spawnWriter(t, o)
		got := make(chan error, 1)
		go func() { got <- o.WaitOutput(t.Context(), w.id, 0) }()
		synctest.Wait()
		select {
		case err := <-got:
			t.Fatalf("returned before any output: %v", err)
		default:
		}
		w.write(t, "hi")
		if err := <-got; err != nil {
			t.Fatalf("on new output: %v", err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		start := time.Now()
		if err := o.WaitOutput(ctx, w.id, 2); !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != 5*time.Second {
			t.Fatalf("no new output: %v after %v", err, time.Since(start))
		}
		cancel()
		go func() { got <- o.WaitOutput(t.Context(), w.id, 2) }()
		synctest.Wait()
		close(w.pieces)
		if err := <-got; err != nil {
			t.Fatalf("at the end: %v", err)
		}
		if _, err := o.Wait(t.Context(), w.id); err != nil {
			t.Fatal(err)
		}
		if err := o.WaitOutput(t.Context(), w.id, 100); err != nil {
			t.Fatalf("after the end: %v", err)
		}
		shutdownManager(t, m)
	})
}

// A write once the function has returned fails with ErrTerminal, and one
// task's output is not another's.
func TestOutputAfterEnd(t *testing.T) {
	t.Parallel()
	m := newTestManager(t)
	o := m.Owner("alice")
	var kept *Task
	id, err := o.Spawn(t.Context(), func(ctx context.Context, tk *Task) (any, error) {
		kept = tk
		return nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.Wait(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	if n, err := kept.Output().Write([]byte("late")); n != 0 || !errors.Is(err, ErrTerminal) {
		t.Fatalf("Write after the end: %d, %v", n, err)
	}
	if got := readOutput(t, o, id, 0, 10); got != (Output{Done: true}) {
		t.Fatalf("a task that wrote nothing: %+v", got)
	}
	if n, err := OutputFrom(t.Context()).Write([]byte("x")); n != 1 || err != nil {
		t.Fatalf("OutputFrom outside a task: %d, %v", n, err)
	}
	shutdownManager(t, m)
}

// A foreground call that prints and is promoted: the host's function saw
// what it printed while in the foreground and nothing after; the notice
// carries the last part and the offset to read from; the offsets go on
// unchanged in the background.
func TestForegroundOutputPromoted(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		m := newTestManager(t)
		o := m.Owner("alice")
		type piece struct {
			off int64
			p   string
		}
		var streamed []piece
		release := make(chan struct{})
		res, err := o.Foreground(t.Context(), time.Second, func(ctx context.Context, tk *Task) (any, error) {
			io.WriteString(tk.Output(), "compiling <a>\n")
			io.WriteString(OutputFrom(ctx), "linking\n")
			<-release
			io.WriteString(tk.Output(), "done\n")
			return 0, nil
		}, WithOutputFunc(func(off int64, p []byte) { streamed = append(streamed, piece{off, string(p)}) }))
		if err != nil || !res.Promoted {
			t.Fatalf("Foreground: %+v, %v", res, err)
		}
		if fmt.Sprint(streamed) != "[{0 compiling <a>\n} {14 linking\n}]" {
			t.Fatalf("streamed: %v", streamed)
		}
		var n struct {
			Message string     `json:"message"`
			Output  outputView `json:"output"`
		}
		if err := json.Unmarshal(res.Result, &n); err != nil {
			t.Fatal(err)
		}
		if n.Output != (outputView{Text: "compiling <a>\nlinking\n", Offset: 0, NextOffset: 22, TotalBytes: 22}) ||
			!strings.Contains(n.Message, "get_task output_since=22") || strings.Contains(string(res.Result), "<a>") {
			t.Fatalf("notice: %s", res.Result)
		}
		close(release)
		if _, err := o.Wait(t.Context(), res.TaskID); err != nil {
			t.Fatal(err)
		}
		if got := readOutput(t, o, res.TaskID, 22, 100); got != (Output{Text: "done\n", Offset: 22, NextOffset: 27, Size: 27, Done: true}) {
			t.Fatalf("after the promotion: %+v", got)
		}
		if len(streamed) != 2 {
			t.Fatalf("streamed after the promotion: %v", streamed)
		}
		shutdownManager(t, m)
	})
}

// The notice's tail is bounded: a call that printed more than
// OutputTailMax bytes gets its last ones, and the offset they start at.
func TestForegroundNoticeTailBounded(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		m := newTestManager(t)
		o := m.Owner("alice")
		release := make(chan struct{})
		big := strings.Repeat("a", 3000) + strings.Repeat("b", OutputTailMax)
		res, err := o.Foreground(t.Context(), time.Second, func(ctx context.Context, tk *Task) (any, error) {
			io.WriteString(tk.Output(), big)
			<-release
			return 0, nil
		})
		if err != nil || !res.Promoted {
			t.Fatalf("Foreground: %+v, %v", res, err)
		}
		var n struct {
			Output outputView `json:"output"`
		}
		if err := json.Unmarshal(res.Result, &n); err != nil {
			t.Fatal(err)
		}
		if n.Output != (outputView{Text: strings.Repeat("b", OutputTailMax), Offset: 3000, NextOffset: int64(len(big)), TotalBytes: int64(len(big))}) {
			t.Fatalf("notice output: %+v", n.Output)
		}
		close(release)
		shutdownManager(t, m)
	})
}

// BenchmarkOutputWrite is the cost of a task's output: 128-byte writes into
// its buffer (bytes/s, allocations per write), the buffer full and
// dropping its oldest bytes at each write.
//
//	go test -run '^$' -bench OutputWrite .
func BenchmarkOutputWrite(b *testing.B) {
	m := newTestManager(b)
	o := m.Owner("alice")
	got := make(chan io.Writer)
	release := make(chan struct{})
	id, err := o.Spawn(b.Context(), func(ctx context.Context, tk *Task) (any, error) {
		got <- tk.Output()
		<-release
		return nil, nil
	})
	if err != nil {
		b.Fatal(err)
	}
	w := <-got
	p := []byte(strings.Repeat("0123456789abcdef", 8))
	for range 1024 { // fill the buffer: its growth is not the benchmark
		w.Write(p)
	}
	b.SetBytes(int64(len(p)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := w.Write(p); err != nil {
			b.Fatal(err)
		}
	}
	close(release)
	if _, err := o.Wait(b.Context(), id); err != nil {
		b.Fatal(err)
	}
}

// ToBackground promotes a foreground call at once (a user's "background
// it", or the task itself), whatever its time; the notice carries the
// output so far. A task not held in the foreground is left alone.
func TestToBackground(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		m := newTestManager(t)
		o := m.Owner("alice")
		release := make(chan struct{})
		start := time.Now()
		res, err := o.Foreground(t.Context(), time.Hour, func(ctx context.Context, tk *Task) (any, error) {
			io.WriteString(tk.Output(), "long job\n")
			if ok, err := o.ToBackground(ctx, tk.ID()); !ok || err != nil {
				return nil, fmt.Errorf("ToBackground: %v, %v", ok, err)
			}
			<-release
			return "done", nil
		})
		if err != nil || !res.Promoted || time.Since(start) != 0 {
			t.Fatalf("Foreground: %+v, %v after %v", res, err, time.Since(start))
		}
		if !strings.Contains(string(res.Result), `"output":{"text":"long job\n","offset":0,"next_offset":9,"dropped_bytes":0,"total_bytes":9}`) ||
			!strings.Contains(string(res.Result), "still running after 0s") {
			t.Fatalf("notice: %s", res.Result)
		}
		if ok, err := o.ToBackground(t.Context(), res.TaskID); ok || err != nil {
			t.Fatalf("ToBackground of a background task: %v, %v", ok, err)
		}
		if _, err := m.Owner("bob").ToBackground(t.Context(), res.TaskID); !errors.Is(err, ErrNotFound) {
			t.Fatalf("another owner's task: %v", err)
		}
		close(release)
		if meta, err := o.Wait(t.Context(), res.TaskID); err != nil || string(meta.Result) != `"done"` {
			t.Fatalf("Wait: %+v, %v", meta, err)
		}
		// Asked before the call waits: it does not wait.
		res, err = o.Foreground(t.Context(), time.Hour, func(ctx context.Context, tk *Task) (any, error) {
			o.ToBackground(ctx, tk.ID())
			<-ctx.Done()
			return nil, ctx.Err()
		})
		if err != nil || !res.Promoted {
			t.Fatalf("promoted before the wait: %+v, %v", res, err)
		}
		shutdownManager(t, m)
	})
}

// An offset in the middle of a character the buffer still holds reads
// from there (nothing is skipped that the reader did not skip itself).
func TestOutputOffsetInCharacter(t *testing.T) {
	t.Parallel()
	m := newTestManager(t)
	o := m.Owner("alice")
	w := spawnWriter(t, o)
	w.write(t, "aéb")
	if got := readOutput(t, o, w.id, 2, 10); got != (Output{Text: "\xa9b", Offset: 2, NextOffset: 4, Size: 4}) {
		t.Fatalf("from the middle of é: %+v", got)
	}
	close(w.pieces)
	shutdownManager(t, m)
}
