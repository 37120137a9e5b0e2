package bgmcp_test

import (
	"fmt"
	"net/http"
	"runtime"
	"testing"
	"time"

	"github.com/bgtask/bgtask"
	bgmcp "github.com/bgtask/bgtask/mcp"
)

// BenchmarkAbandonedSessions opens 10,000 HTTP sessions that their clients
// abandon (never delete), and reports the heap and goroutines they hold
// while open and once their idle timeout (a minute here) ended them. Run it
// with -benchtime=1x: each iteration waits for the timeout.
//
//	go test -run '^$' -bench AbandonedSessions -benchtime=1x ./mcp
func BenchmarkAbandonedSessions(b *testing.B) {
	const sessions = 10_000
	m, err := bgtask.New()
	if err != nil {
		b.Fatal(err)
	}
	defer m.Shutdown(b.Context())
	for b.Loop() {
		s, err := bgmcp.NewServer(m, bgmcp.WithSessionTimeout(time.Minute), bgmcp.WithMaxSessions(sessions))
		if err != nil {
			b.Fatal(err)
		}
		heap0, g0 := heapAndGoroutines()
		for range sessions {
			c := &handlerClient{t: b, h: s.Handler()}
			if code, body := c.open(); code != http.StatusAccepted {
				b.Fatalf("open: %d %s", code, body)
			}
			// The default owner is the session's, known once used.
			if code, body := c.do(http.MethodPost, map[string]any{"jsonrpc": "2.0", "id": 2, "method": "tasks/list", "params": map[string]any{}}); code != http.StatusOK {
				b.Fatalf("tasks/list: %d %s", code, body)
			}
		}
		heap1, g1 := heapAndGoroutines()
		if n := s.OpenSessions(); n != sessions {
			b.Fatalf("%d open sessions, want %d", n, sessions)
		}
		// Wait past the timeout until every session is gone.
		for s.OpenSessions() > 0 || bgmcp.KnownOwners(s) > 0 || runtime.NumGoroutine() > g0 {
			time.Sleep(100 * time.Millisecond)
		}
		heap2, g2 := heapAndGoroutines()
		b.ReportMetric(float64(heap1-heap0)/sessions, "heap-B/open-session")
		b.ReportMetric(float64(g1-g0)/sessions, "goroutines/open-session")
		b.ReportMetric(float64(heap2-heap0), "heap-B-left-after-timeout")
		b.ReportMetric(float64(g2-g0), "goroutines-left-after-timeout")
		b.Log(fmt.Sprintf("%d sessions open: heap +%.1f MB, goroutines +%d; after the timeout: heap %+.1f MB, goroutines %+d",
			sessions, float64(heap1-heap0)/1e6, g1-g0, float64(heap2-heap0)/1e6, g2-g0))
		runtime.KeepAlive(s)
	}
}

// heapAndGoroutines returns the live heap after a collection, and the
// number of goroutines.
func heapAndGoroutines() (int64, int) {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc), runtime.NumGoroutine()
}
