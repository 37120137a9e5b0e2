package main

import (
	"runtime/metrics"
	"testing"
)

// goStarts returns how many goroutines the process has started so far.
func goStarts() uint64 {
	s := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// reportGoStarts reports, when the returned func is called at the end of
// b, the goroutines started per iteration ("gostarts/op"): a handoff to a
// new goroutine is one, a handoff to a parked one is none (workpool).
func reportGoStarts(b *testing.B) func() {
	before := goStarts()
	return func() { b.ReportMetric(float64(goStarts()-before)/float64(b.N), "gostarts/op") }
}
