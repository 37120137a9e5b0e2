package bgtask_test

import (
	"context"
	"testing"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/internal/benchfloor"
)

func answer42(context.Context) (any, error) { return 42, nil }

// BenchmarkRawGoRecordedResult is the floor under BenchmarkSpawnComplete:
// one task at a time, kept by hand as benchfloor.ByHand describes.
//
//	go test -run '^$' -bench 'SpawnComplete|RawGoCtxResultChan|RawGoRecordedResult' .
func BenchmarkRawGoRecordedResult(b *testing.B) {
	h := benchfloor.New(benchOwner)
	buf := make([]bgtype.Event, 0, 16)
	b.ReportAllocs()
	for b.Loop() {
		id := h.Spawn(answer42)
		for done := false; !done; {
			buf = h.Drain(buf[:0])
			for i := range buf {
				if buf[i].TaskID == id && string(buf[i].Result) == "42" {
					done = true
				}
			}
			h.Forget(buf)
		}
	}
}

// BenchmarkRawBurst10kRecorded is the floor under BenchmarkSpawnBurst10k:
// burstK tasks kept by hand as benchfloor.ByHand describes, then every
// completed event awaited.
func BenchmarkRawBurst10kRecorded(b *testing.B) {
	h := benchfloor.New(benchOwner)
	buf := make([]bgtype.Event, 0, burstK)
	b.ReportAllocs()
	for b.Loop() {
		for range burstK {
			h.Spawn(answer42)
		}
		for got := 0; got < burstK; {
			buf = h.Drain(buf[:0])
			for i := range buf {
				if buf[i].Kind != bgtype.EventCompleted || string(buf[i].Result) != "42" {
					b.Fatalf("event %+v, want completed with result 42", buf[i])
				}
			}
			got += len(buf)
			h.Forget(buf)
		}
	}
}
