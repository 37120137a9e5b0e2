package bgtask

import (
	"sync"
	"testing"

	"github.com/bgtask/bgtask/bgtype"
)

// receiverRun makes a Manager and the Receiver of thread-1 with a run
// started, and records the events OnWake hears of.
type receiverRun struct {
	m     *Manager
	p     *Receiver
	o     Owner
	mu    sync.Mutex
	woken []bgtype.Event
}

func newReceiverRun(t *testing.T, opts ...Option) *receiverRun {
	t.Helper()
	pr := &receiverRun{m: newTestManager(t, opts...)}
	pr.o = pr.m.Owner("thread-1")
	var err error
	pr.p, err = pr.m.NewReceiver("thread-1", ReceiverConfig{OnWake: func(ev bgtype.Event) {
		pr.mu.Lock()
		pr.woken = append(pr.woken, ev)
		pr.mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := pr.p.RunStart(t.Context(), RunInfo{RunID: "run-1"}); err != nil {
		t.Fatal(err)
	}
	return pr
}

func (pr *receiverRun) wokenKinds() []string {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	var out []string
	for _, ev := range pr.woken {
		out = append(out, string(ev.Kind))
	}
	return out
}

// messageKinds lists the kinds of evs.
func messageKinds(evs []bgtype.Event) []string {
	var out []string
	for _, ev := range evs {
		out = append(out, string(ev.Kind))
	}
	return out
}
