package pgstore_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bgtask/bgtask"
	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store/pgstore"
	"github.com/bgtask/bgtask/store/pgstore/pgtest"
	"github.com/jackc/pgx/v5"
)

// BenchmarkFleet measures what crosses instances of a fleet on one
// PostgreSQL server with its default settings (issue 29 §6, issue 35 §3),
// with 2 and 4 instances (in one process, each its own Store, connections
// and listener; the instances past the first two only listen): from a
// task's end on A to the wake of its owner's idle Receiver on B
// (wake-p50-ms, wake-p99-ms); from Send on B to a sub-agent on A
// receiving the message (send-p50-ms, send-p99-ms); from a task's release
// on A to Wait returning on B (wait-p50-ms, wait-p99-ms); a ReadOutput on
// B of 1 KiB of a task's output that A keeps (read-p50-ms, read-p99-ms).
// With notify=on notifications carry each, and the poll interval (the
// fallback) is an hour, so a lost one would show as a stall; with
// notify=off no instance LISTENs and the poll, every fleetPoll, carries
// each (the wake by the catch-up on what settled, decision 724), so it
// bounds their p99. raw is the reference for the same server in the same
// run: a bare NOTIFY heard by a LISTENing connection (notify-p50-ms,
// notify-p99-ms), and a committed row change with its NOTIFY
// (commit-p50-ms, commit-p99-ms), the floor of a wake.
//
//	go test -run '^$' -bench BenchmarkFleet -benchtime 200x ./store/pgstore
func BenchmarkFleet(b *testing.B) {
	b.Run("raw", benchRawNotify)
	for _, notify := range []bool{true, false} {
		for _, n := range []int{2, 4} {
			b.Run(fmt.Sprintf("notify=%s/instances=%d", onOff(notify), n), func(b *testing.B) {
				opts := []pgstore.Option{pgstore.WithPollInterval(time.Hour)}
				if !notify {
					opts = []pgstore.Option{pgstore.WithPollInterval(fleetPoll), pgstore.WithoutNotifications()}
				}
				ms, ss := fleetManagers(b, n, opts...)
				a, bm := ms[0], ms[1]
				b.Run("wake", func(b *testing.B) { benchWake(b, a, bm, ss[1]) })
				b.Run("send", func(b *testing.B) { benchSend(b, a, bm) })
				b.Run("wait", func(b *testing.B) { benchWait(b, a, bm) })
				b.Run("read", func(b *testing.B) { benchRead(b, a, bm) })
			})
		}
	}
}

// fleetPoll is the poll interval of BenchmarkFleet without notifications.
const fleetPoll = 100 * time.Millisecond

func onOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
}

// fleetManagers starts n instances on one fresh database, their Stores
// opened with opts.
func fleetManagers(b *testing.B, n int, opts ...pgstore.Option) ([]*bgtask.Manager, []*pgstore.Store) {
	dsn := pgtest.NewDSN(b)
	var ms []*bgtask.Manager
	var ss []*pgstore.Store
	for i := range n {
		s, err := pgstore.Open(b.Context(), dsn, opts...)
		if err != nil {
			b.Fatal(err)
		}
		m, err := bgtask.New(bgtask.WithStore(s), bgtask.WithInstance(fmt.Sprintf("inst_%d", i)))
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Start(b.Context(), m.Runtime()); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() {
			m.Shutdown(context.Background())
			s.Close()
		})
		ms = append(ms, m)
		ss = append(ss, s)
	}
	return ms, ss
}

// latencies collects durations and reports their p50 and p99 in ms.
type latencies struct {
	mu sync.Mutex
	ds []time.Duration
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	l.ds = append(l.ds, d)
	l.mu.Unlock()
}

func (l *latencies) report(b *testing.B, name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.ds) == 0 {
		return
	}
	slices.Sort(l.ds)
	q := func(p float64) float64 {
		return float64(l.ds[min(len(l.ds)-1, int(p*float64(len(l.ds))))].Microseconds()) / 1000
	}
	b.ReportMetric(q(0.50), name+"-p50-ms")
	b.ReportMetric(q(0.99), name+"-p99-ms")
}

// benchWake: a task of alice ends on a; alice's Receiver idles on bm,
// whose Store is sb. Besides the whole (wake), it reports where the time
// goes: from the end to sb telling that the record settled (heard: a's
// commit, the NOTIFY or the catch-up), and from there to OnWake (fanout:
// bm's read of the record and its callback queue).
func benchWake(b *testing.B, a, bm *bgtask.Manager, sb *pgstore.Store) {
	var (
		ends      sync.Map // task id -> time.Time of its function's return
		heard     sync.Map // task id -> time.Time sb told it settled
		lat       latencies
		latHeard  latencies
		latFanout latencies
		woken     = make(chan string, 16)
	)
	stop := sb.OnSettled(func(id, _ string) { heard.LoadOrStore(id, time.Now()) })
	defer stop()
	owner := fmt.Sprintf("alice-%d", time.Now().UnixNano())
	r, err := bm.NewReceiver(owner, bgtask.ReceiverConfig{OnWake: func(ev bgtype.Event) {
		if ev.Kind.IsTerminal() {
			woken <- ev.TaskID
		}
	}})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close(context.Background())
	ctx := b.Context()
	b.ReportAllocs()
	for b.Loop() {
		id, err := a.Owner(owner).Spawn(ctx, func(_ context.Context, t *bgtask.Task) (any, error) {
			ends.Store(t.ID(), time.Now())
			return "ok", nil
		})
		if err != nil {
			b.Fatal(err)
		}
		for got := <-woken; got != id; got = <-woken {
		}
		now := time.Now()
		t0, _ := ends.Load(id)
		lat.add(now.Sub(t0.(time.Time)))
		if t1, ok := heard.Load(id); ok {
			latHeard.add(t1.(time.Time).Sub(t0.(time.Time)))
			latFanout.add(now.Sub(t1.(time.Time)))
		}
	}
	lat.report(b, "wake")
	latHeard.report(b, "heard")
	latFanout.report(b, "fanout")
}

// benchSend: bm sends to a sub-agent of alice running on a.
func benchSend(b *testing.B, a, bm *bgtask.Manager) {
	var (
		lat  latencies
		sent sync.Map // content -> time.Time of the Send call
		got  = make(chan struct{}, 1)
	)
	owner := fmt.Sprintf("alice-%d", time.Now().UnixNano())
	ctx := b.Context()
	id, err := a.Owner(owner).SpawnAgent(ctx, func(ctx context.Context, t *bgtask.Task) (any, error) {
		for {
			if err := t.Inbox().Wait(ctx); err != nil {
				return nil, err
			}
			for _, ev := range t.Inbox().Drain() {
				if msg, ok := ev.Message(); ok {
					if t0, ok := sent.Load(msg.Content); ok {
						lat.add(time.Since(t0.(time.Time)))
					}
					got <- struct{}{}
				}
			}
		}
	})
	if err != nil {
		b.Fatal(err)
	}
	defer a.Cancel(context.Background(), id)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		content := fmt.Sprint(i)
		sent.Store(content, time.Now())
		if _, err := bm.Owner(owner).Send(ctx, id, bgtype.Message{Content: content}); err != nil {
			b.Fatal(err)
		}
		<-got
	}
	lat.report(b, "send")
}

// benchWait: bm waits for a task of alice that a releases.
func benchWait(b *testing.B, a, bm *bgtask.Manager) {
	var lat latencies
	owner := fmt.Sprintf("alice-%d", time.Now().UnixNano())
	ctx := b.Context()
	b.ReportAllocs()
	for b.Loop() {
		release := make(chan struct{})
		var t0 atomic.Int64 // the release, in Unix ns: read across the database, no Go edge
		id, err := a.Owner(owner).Spawn(ctx, func(context.Context, *bgtask.Task) (any, error) {
			<-release
			t0.Store(time.Now().UnixNano())
			return "ok", nil
		})
		if err != nil {
			b.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			_, err := bm.Owner(owner).Wait(ctx, id)
			done <- err
		}()
		close(release)
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		lat.add(time.Duration(time.Now().UnixNano() - t0.Load()))
	}
	lat.report(b, "wait")
}

// benchRead: bm reads 1 KiB of the output of a task of alice that a runs
// (carried to a and back).
func benchRead(b *testing.B, a, bm *bgtask.Manager) {
	var lat latencies
	owner := fmt.Sprintf("alice-%d", time.Now().UnixNano())
	ctx := b.Context()
	wrote := make(chan struct{})
	id, err := a.Owner(owner).Spawn(ctx, func(ctx context.Context, t *bgtask.Task) (any, error) {
		for range 64 {
			if _, err := t.Output().Write(make([]byte, 1<<10)); err != nil {
				return nil, err
			}
		}
		close(wrote)
		<-ctx.Done()
		return nil, ctx.Err()
	})
	if err != nil {
		b.Fatal(err)
	}
	defer a.Cancel(context.Background(), id)
	<-wrote
	o := bm.Owner(owner)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		t0 := time.Now()
		out, err := o.ReadOutput(ctx, id, int64(i%64)<<10, 1<<10)
		if err != nil || len(out.Text) != 1<<10 {
			b.Fatalf("read %d bytes, %v", len(out.Text), err)
		}
		lat.add(time.Since(t0))
		i++
	}
	lat.report(b, "read")
}

// benchRawNotify measures, on a fresh database of the same server, a bare
// NOTIFY from one connection to another that LISTENs (notify), and a row
// changed and committed with its NOTIFY in one transaction (commit), each
// from the call to the listener hearing it.
func benchRawNotify(b *testing.B) {
	dsn := pgtest.NewDSN(b)
	ctx := b.Context()
	listener, err := pgx.Connect(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer listener.Close(context.Background())
	sender, err := pgx.Connect(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer sender.Close(context.Background())
	if _, err := sender.Exec(ctx, `CREATE TABLE raw_notify (id int PRIMARY KEY, n bigint NOT NULL); INSERT INTO raw_notify VALUES (1, 0)`); err != nil {
		b.Fatal(err)
	}
	if _, err := listener.Exec(ctx, `LISTEN bgtask_bench_raw`); err != nil {
		b.Fatal(err)
	}
	var notify, commit latencies
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		for _, c := range []struct {
			sql string
			lat *latencies
		}{
			{`SELECT pg_notify('bgtask_bench_raw', $1::text)`, &notify},
			{`WITH u AS (UPDATE raw_notify SET n = $1::text::bigint WHERE id = 1 RETURNING n) SELECT pg_notify('bgtask_bench_raw', n::text) FROM u`, &commit},
		} {
			t0 := time.Now()
			if _, err := sender.Exec(ctx, c.sql, strconv.Itoa(i)); err != nil {
				b.Fatal(err)
			}
			n, err := listener.WaitForNotification(ctx)
			if err != nil || n.Payload != strconv.Itoa(i) {
				b.Fatalf("heard %+v, %v; want %d", n, err, i)
			}
			c.lat.add(time.Since(t0))
		}
	}
	notify.report(b, "notify")
	commit.report(b, "commit")
}
