package gstate_test

import (
	"testing"
	"testing/synctest"

	"github.com/bgtask/bgtask/internal/gstate"
)

//go:noinline
func blockedReceiver(ch chan struct{}) { <-ch }

func TestOf(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const frame = "github.com/bgtask/bgtask/internal/gstate_test.blockedReceiver"
		if s := gstate.Of(frame); s != "" {
			t.Fatalf("state before the goroutine starts %q, want \"\"", s)
		}
		ch, done := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(done)
			blockedReceiver(ch)
		}()
		synctest.Wait() // it is blocked in its receive
		if s := gstate.Of(frame); s != "chan receive (durable)" {
			t.Fatalf("state of a blocked receiver %q, want \"chan receive (durable)\"", s)
		}
		close(ch)
		<-done
		if s := gstate.Of(frame); s != "" {
			t.Fatalf("state of an ended goroutine %q, want \"\"", s)
		}
	})
}
