// Package gstate reads the scheduler state of a goroutine from
// runtime.Stack, for tests that must know whether a goroutine yields
// (runnable) or blocks (a channel receive, a select) at a given point.
package gstate
