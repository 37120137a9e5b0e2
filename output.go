// A task's output is a runtime concept: what its function writes to
// Task.Output, kept in memory in a bounded buffer with stable byte offsets,
// read piece by piece (Owner.ReadOutput) and waited for (Owner.WaitOutput).

package bgtask

import (
	"context"
	"io"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/bgtask/bgtask/internal/fifo"
	"github.com/bgtask/bgtask/store"
)

// Bounds of the outputs of ended tasks that the Manager keeps, so that one
// that runs for months keeps a bounded amount: those of at most
// outputsEnded ended tasks and outputsEndedBytes bytes in all; the output
// of the task that ended longest ago is forgotten first. A live task's
// output is never forgotten (each is bounded by Caps.MaxOutputBytes).
const (
	outputsEnded      = 1024
	outputsEndedBytes = 32 << 20
)

// OutputTailMax is how many bytes of a task's latest output a promotion
// notice of Owner.Foreground carries at most.
const OutputTailMax = 2 << 10

// Output is a piece of a task's output (Task.Output), as Owner.ReadOutput
// and Owner.TailOutput return it. Offsets count the bytes the task has
// written since it started, from 0; they never change, whatever the buffer
// forgot and whether the task was promoted from the foreground meanwhile,
// so a reader that goes on from NextOffset sees every byte kept once, in
// order.
type Output struct {
	// Text is the piece: bytes from Offset, never cutting a UTF-8 sequence
	// in two while the task may still write its end.
	Text string
	// Offset is the offset of Text's first byte.
	Offset int64
	// NextOffset is where the next read goes on: Offset+len(Text).
	NextOffset int64
	// Dropped is how many bytes between the offset asked and Offset the
	// buffer no longer holds (it keeps the last Caps.MaxOutputBytes): they
	// are lost to this reader.
	Dropped int64
	// Size is how many bytes the task has written in all so far.
	Size int64
	// Done reports that the task writes no more: its function has returned
	// (or its output was forgotten, see Owner.ReadOutput).
	Done bool
}

// outputBuf is one task's output: the last max bytes written, in a ring,
// and the offsets they have.
type outputBuf struct {
	owner string
	max   int

	// streamMu serializes the writes of a task whose output is streamed to
	// its foreground caller (WithOutputFunc), with the calls of that
	// function and the stop of the stream: each piece is handed over in
	// order, and never after the stop returned.
	streamMu  sync.Mutex
	stream    func(offset int64, p []byte) // guarded by streamMu; nil once stopped
	streaming atomic.Bool                  // stream is set: Write takes streamMu

	mu    sync.Mutex    // guards the fields below
	data  []byte        // the ring: offset x is at data[x%len(data)]
	start int64         // the first offset kept (every byte before it was dropped)
	end   int64         // the offset of the next byte written: the size written
	done  bool          // the function has returned: no more writes
	wake  chan struct{} // made by a waiter, closed by the next write or the end
}

// write appends p, dropping the oldest bytes over max. It reports false
// once the task is done.
func (b *outputBuf) write(p []byte) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done {
		return false
	}
	end := b.end + int64(len(p))
	if len(p) > b.max { // only its last max bytes can be kept
		p = p[len(p)-b.max:]
	}
	start := max(b.start, end-int64(b.max))
	if need := int(end - start); need > len(b.data) {
		b.grow(need, start)
	}
	b.start, b.end = start, end
	n := int64(len(b.data))
	for x := end - int64(len(p)); len(p) > 0; {
		c := copy(b.data[x%n:], p)
		p, x = p[c:], x+int64(c)
	}
	b.signal()
	return true
}

// grow makes the ring hold need bytes (at most max), keeping the bytes it
// holds from offset start at their offsets. Called with b.mu held.
func (b *outputBuf) grow(need int, start int64) {
	size := max(256, 2*len(b.data))
	for size < need {
		size *= 2
	}
	data := make([]byte, min(size, b.max))
	if n, m := int64(len(b.data)), int64(len(data)); n > 0 {
		for x := max(start, b.start); x < b.end; x++ {
			data[x%m] = b.data[x%n]
		}
	}
	b.data = data
}

// signal wakes the waiters. Called with b.mu held.
func (b *outputBuf) signal() {
	if b.wake != nil {
		close(b.wake)
		b.wake = nil
	}
}

// finish marks the output done: later writes fail, waiters return. It
// returns the size written, final now.
func (b *outputBuf) finish() int64 {
	b.mu.Lock()
	b.done = true
	b.signal()
	size := b.end
	b.mu.Unlock()
	return size
}

// read returns at most limit bytes from offset from (at least
// utf8.UTFMax, so that a whole character always fits).
func (b *outputBuf) read(from int64, limit int) Output {
	limit = max(limit, utf8.UTFMax)
	b.mu.Lock()
	defer b.mu.Unlock()
	out := Output{Size: b.end, Done: b.done}
	from = min(from, b.end)
	at := max(from, b.start)
	// A character the drop cut in two is skipped whole (its first bytes
	// are gone); an offset given in the middle of one reads from there.
	if at == b.start && b.start > 0 {
		for i := 0; i < utf8.UTFMax-1 && at < b.end && !utf8.RuneStart(b.byteAt(at)); i++ {
			at++
		}
	}
	to := min(b.end, at+int64(limit))
	if to < b.end || !b.done {
		to = runeEnd(b, at, to) // the rest of a character comes with the next read
	}
	out.Offset, out.NextOffset, out.Dropped = at, to, max(0, at-from)
	n := int64(len(b.data))
	if i, j := at%max(n, 1), to%max(n, 1); at == to || i < j {
		out.Text = string(b.data[i : i+to-at])
	} else { // it wraps round the ring
		out.Text = string(b.data[i:]) + string(b.data[:j])
	}
	return out
}

// byteAt returns the kept byte at offset x. Called with b.mu held.
func (b *outputBuf) byteAt(x int64) byte { return b.data[x%int64(len(b.data))] }

// runeEnd returns to, moved back to the start of a UTF-8 sequence that does
// not end before to, if one begins within the last utf8.UTFMax-1 bytes of
// [at, to). Called with b.mu held.
func runeEnd(b *outputBuf, at, to int64) int64 {
	for x := to - 1; x >= at && x > to-utf8.UTFMax; x-- {
		c := b.byteAt(x)
		if !utf8.RuneStart(c) {
			continue
		}
		var need int64
		switch {
		case c < 0x80:
			need = 1
		case c&0xE0 == 0xC0:
			need = 2
		case c&0xF0 == 0xE0:
			need = 3
		case c&0xF8 == 0xF0:
			need = 4
		default:
			return to // not the start of a valid sequence: leave it as it is
		}
		if x+need > to {
			return x
		}
		return to
	}
	return to
}

// outputLog is the Manager's outputs by task id. The zero value is ready.
type outputLog struct {
	mu     sync.Mutex // guards the fields below
	byTask map[string]*outputBuf
	ended  fifo.Queue[string] // ids of ended tasks with output, in the order they ended
	bytes  int                // bytes held by the ended ones
}

// add registers b as task id's output.
func (l *outputLog) add(id string, b *outputBuf) {
	l.mu.Lock()
	if l.byTask == nil {
		l.byTask = make(map[string]*outputBuf)
	}
	l.byTask[id] = b
	l.mu.Unlock()
}

// get returns task id's output if the owner has it.
func (l *outputLog) get(owner, id string) *outputBuf {
	l.mu.Lock()
	defer l.mu.Unlock()
	if b := l.byTask[id]; b != nil && b.owner == owner {
		return b
	}
	return nil
}

// ended notes that task id's output b is done, and forgets the oldest
// ended outputs over the bounds.
func (l *outputLog) endedOutput(id string, b *outputBuf) {
	b.mu.Lock()
	size := len(b.data)
	b.mu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ended.Push(id)
	l.bytes += size
	for l.ended.Len() > outputsEnded || l.bytes > outputsEndedBytes && l.ended.Len() > 1 {
		old := l.ended.Pop()
		if ob := l.byTask[old]; ob != nil {
			ob.mu.Lock()
			l.bytes -= len(ob.data)
			ob.mu.Unlock()
			delete(l.byTask, old)
		}
	}
}

// Output returns the writer of the task's output: what the function
// writes there is kept in memory, the last Caps.MaxOutputBytes of it (the
// oldest bytes are dropped first, and counted), for its owner to read from
// any offset (Owner.ReadOutput, the get_task tool), to wait for
// (Owner.WaitOutput) and, while the task is held in the foreground with
// WithOutputFunc, to stream to a user. A task that never writes costs
// nothing: the buffer is made by the first write.
//
// Write never blocks on a reader and never fails for a full buffer; it
// returns an error matching ErrTerminal once the function has returned.
// The text may be anything; what reaches a model is escaped and capped by
// whoever shows it. Writes from several goroutines are each kept whole and
// in the order they took the buffer. The writer is safe for concurrent use.
func (t *Task) Output() io.Writer { return (*taskOutput)(t) }

// OutputFrom returns the output writer of the task running ctx
// (TaskFromContext): a tool that a Foreground call or a background task
// runs writes its output there. Outside a task it returns io.Discard.
func OutputFrom(ctx context.Context) io.Writer {
	if t, ok := TaskFromContext(ctx); ok {
		return t.Output()
	}
	return io.Discard
}

// taskOutput is Task.Output's writer: the task itself (a conversion of the
// pointer, no allocation).
type taskOutput Task

// Write implements io.Writer.
func (w *taskOutput) Write(p []byte) (int, error) {
	t := (*Task)(w)
	b := t.outputBuf()
	if b == nil {
		return 0, errTaskEnded
	}
	if len(p) == 0 {
		return 0, nil
	}
	if !b.streaming.Load() {
		if !b.write(p) {
			return 0, errTaskEnded
		}
		return len(p), nil
	}
	b.streamMu.Lock()
	defer b.streamMu.Unlock()
	b.mu.Lock()
	off := b.end
	b.mu.Unlock()
	if !b.write(p) {
		return 0, errTaskEnded
	}
	if b.stream != nil {
		t.m.callStream(t, b, off, p)
	}
	return len(p), nil
}

// callStream calls b's stream function with a piece written at offset off;
// a panic in it stops the stream and is logged. Called with b.streamMu held.
func (m *Manager) callStream(t *Task, b *outputBuf, off int64, p []byte) {
	defer func() {
		if v := recover(); v != nil {
			b.stream = nil
			b.streaming.Store(false)
			m.log.Error("bgtask: output function panicked: the output is no longer streamed", "task_id", t.rec.ID, "panic", v)
		}
	}()
	b.stream(off, p)
}

// outputBuf returns t's output buffer, made and registered on first use;
// nil once the function has returned without having made one.
func (t *Task) outputBuf() *outputBuf {
	if r := t.rare.Load(); r != nil {
		if b := r.output.Load(); b != nil {
			return b
		}
	}
	t.emitMu.Lock()
	defer t.emitMu.Unlock()
	if t.ended {
		return nil
	}
	return t.newOutputLocked()
}

// newOutputLocked returns t's output buffer, making it if there is none
// yet, streamed to the task's WithOutputFunc if it is still held in the
// foreground. Called with t.emitMu held.
func (t *Task) newOutputLocked() *outputBuf {
	r := t.rareState()
	if b := r.output.Load(); b != nil {
		return b
	}
	b := &outputBuf{owner: t.rec.Owner, max: t.m.cfg.caps.MaxOutputBytes, stream: r.outputFunc}
	b.streaming.Store(r.outputFunc != nil)
	t.m.outputs.add(t.rec.ID, b)
	r.output.Store(b)
	return b
}

// endOutput marks t's output done, if it has one, and returns the bytes
// written to it in all, which the terminal record keeps (OutputBytes): 0
// for a task that made no buffer, with no lock taken. Called with t.emitMu
// held, as t.ended is set: a buffer made after it is born done, and no
// write lands after the size is read (finish, under the buffer's lock).
func (t *Task) endOutput() int64 {
	r := t.rare.Load()
	if r == nil {
		return 0
	}
	b := r.output.Load()
	if b == nil {
		return 0
	}
	size := b.finish()
	t.m.outputs.endedOutput(t.rec.ID, b)
	return size
}

// stopStream stops the streaming of task id's output to its foreground
// caller (WithOutputFunc), waiting for a call of the function in progress.
func (m *Manager) stopStream(owner, id string) {
	if t := m.liveTask(owner, id); t != nil {
		if r := t.rare.Load(); r != nil {
			t.emitMu.Lock()
			r.outputFunc = nil // a buffer made from now on is not streamed
			t.emitMu.Unlock()
		}
	}
	b := m.outputs.get(owner, id)
	if b == nil || !b.streaming.Load() {
		return
	}
	b.streamMu.Lock()
	b.stream = nil
	b.streaming.Store(false)
	b.streamMu.Unlock()
}

// WithOutputFunc streams the task's output (Task.Output) to fn while an
// Owner.Foreground call holds it in the foreground, so that a host can show
// a user what the call prints as it prints it. fn gets each piece written
// with its offset, in order, on the writing goroutine, after the piece is
// in the buffer; the Write waits for it, so fn should hand the piece on
// and return. It is never called after Foreground returned (promoted or
// not): from then on the output is read with Owner.ReadOutput, by the
// model or the host. fn must not keep p. A panic in fn is recovered and
// logged, and stops the streaming. Spawn and SpawnAgent ignore it.
//
// A function, not a reader, because the caller of Foreground is waiting
// anyway and a function needs no goroutine of its own; a host that wants a
// reader reads with Owner.ReadOutput and Owner.WaitOutput, which also work
// after the promotion.
func WithOutputFunc(fn func(offset int64, p []byte)) SpawnOption {
	return func(c *spawnConfig) { c.outputFunc = fn }
}

// ReadOutput returns the output of one of the owner's tasks (Task.Output)
// from offset from, at most limit bytes of it (at least 4, so that a whole
// UTF-8 character fits; a character is never cut in two while the task
// runs). A from beyond what was written reads nothing, at the end. Bytes
// the buffer no longer holds are skipped and counted in Dropped. A task
// that wrote nothing reads as empty, Done once it has ended. The outputs
// are kept in the memory of the instance that runs the task: with a store
// that carries reads (store.OutputCarrier, as pgstore), a task another
// instance runs, or ran, is read there, with the same result and errors;
// with another store, another process's tasks read as empty. The outputs
// of ended tasks are forgotten oldest first beyond 1024 tasks or 32 MiB
// (they then read as empty and Done). It never blocks on the task.
// Errors: ErrInvalidArgument for a negative from, ErrNotFound for an
// unknown task or another owner's, ErrNotLive when the instance that keeps
// the output is gone (the output is lost), the Store's.
func (o Owner) ReadOutput(ctx context.Context, id string, from int64, limit int) (Output, error) {
	return o.readOutput(ctx, id, from, limit, true)
}

// readOutput is ReadOutput; carry tells whether a task whose output
// another instance keeps is read there.
func (o Owner) readOutput(ctx context.Context, id string, from int64, limit int, carry bool) (Output, error) {
	if from < 0 {
		return Output{}, invalidArgument("negative output offset %d", from)
	}
	if b := o.m.outputs.get(o.id, id); b != nil {
		return b.read(from, limit), nil
	}
	meta, err := o.Get(ctx, id)
	if err != nil {
		return Output{}, err
	}
	if oc, ok := o.m.outputCarrier(&meta); ok && carry {
		return o.m.readElsewhere(ctx, oc, o.id, &meta, store.OutputRequest{From: from, Limit: limit})
	}
	return Output{Done: meta.Status.IsTerminal() || o.m.liveTask(o.id, id) == nil}, nil
}

// TailOutput returns the last n bytes (at most; at least 4) of the output
// of one of the owner's tasks, as ReadOutput does from the offset n bytes
// before its end.
func (o Owner) TailOutput(ctx context.Context, id string, n int) (Output, error) {
	return o.tailOutput(ctx, id, n, true)
}

// tailOutput is TailOutput; carry as for readOutput.
func (o Owner) tailOutput(ctx context.Context, id string, n int, carry bool) (Output, error) {
	if b := o.m.outputs.get(o.id, id); b != nil {
		b.mu.Lock()
		from := max(b.start, b.end-int64(max(n, 0)))
		b.mu.Unlock()
		return b.read(from, n), nil
	}
	meta, err := o.Get(ctx, id)
	if err != nil {
		return Output{}, err
	}
	if oc, ok := o.m.outputCarrier(&meta); ok && carry {
		return o.m.readElsewhere(ctx, oc, o.id, &meta, store.OutputRequest{Limit: n, Tail: true})
	}
	return o.readOutput(ctx, id, 0, n, false)
}

// WaitOutput waits until one of the owner's tasks has written past offset
// from, or writes no more (its function has returned), and returns nil; or
// until ctx ends, and returns its cause. A task that another instance
// runs is waited for there when the store carries reads (see ReadOutput),
// woken by the first write or the end, with no polling; with another
// store, or when the output was forgotten, it returns at once. Errors:
// ErrInvalidArgument for a negative from, ErrNotFound for an unknown task
// or another owner's, ErrNotLive when the instance that keeps the output
// is gone, the Store's, ctx's cause.
func (o Owner) WaitOutput(ctx context.Context, id string, from int64) error {
	return o.waitOutput(ctx, id, from, true)
}

// waitOutput is WaitOutput; carry as for readOutput.
func (o Owner) waitOutput(ctx context.Context, id string, from int64, carry bool) error {
	if from < 0 {
		return invalidArgument("negative output offset %d", from)
	}
	b := o.m.outputs.get(o.id, id)
	if b == nil {
		t := o.m.liveTask(o.id, id)
		if t == nil {
			meta, err := o.Get(ctx, id)
			if err != nil {
				return err
			}
			if oc, ok := o.m.outputCarrier(&meta); ok && carry {
				return o.m.waitElsewhereOutput(ctx, oc, o.id, &meta, from)
			}
			return nil
		}
		t.emitMu.Lock()
		if !t.ended {
			b = t.newOutputLocked() // made now, so that the first write wakes this wait
		}
		t.emitMu.Unlock()
		if b == nil {
			return nil
		}
	}
	for {
		b.mu.Lock()
		if b.done || b.end > from {
			b.mu.Unlock()
			return nil
		}
		if b.wake == nil {
			b.wake = make(chan struct{})
		}
		wake := b.wake
		b.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// liveTask returns the owner's task id while this Manager runs it, or nil.
func (m *Manager) liveTask(owner, id string) *Task {
	m.mu.Lock()
	defer m.mu.Unlock()
	if t := m.nodes[id]; t != nil && t.phase != phaseGone && t.rec.Owner == owner {
		return t
	}
	return nil
}

// outputTail returns the last OutputTailMax bytes of task id's output and
// the offset they start at, for a promotion notice; ok is false if the task
// has written nothing.
func (m *Manager) outputTail(owner, id string) (out Output, ok bool) {
	b := m.outputs.get(owner, id)
	if b == nil {
		return Output{}, false
	}
	b.mu.Lock()
	from := max(b.start, b.end-OutputTailMax)
	empty := b.end == 0
	b.mu.Unlock()
	if empty {
		return Output{}, false
	}
	return b.read(from, OutputTailMax), true
}

// OutputSize returns how many bytes one of the owner's tasks has written
// to its output (Task.Output) so far, as this Manager keeps it: 0 for a
// task that wrote nothing, another owner's, one another process runs (read
// that one's with ReadOutput, which asks there), or one whose output was
// forgotten. It never blocks on the task.
func (o Owner) OutputSize(id string) int64 {
	b := o.m.outputs.get(o.id, id)
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.end
}
