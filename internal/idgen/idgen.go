package idgen

import (
	"encoding/binary"
	"encoding/hex"
	"math/rand/v2"
	"sync/atomic"
	"time"
)

// TaskPrefix starts every task id.
const TaskPrefix = "task_"

// maxPrefix is the longest prefix New builds on the stack; a longer one
// costs one more allocation.
const maxPrefix = 16

// lastV7 is the last (unix milliseconds << 12 | sequence) handed out, so
// ids made in one process sort in creation order even within a millisecond.
var lastV7 atomic.Uint64

// NewTask returns a task id for a task created at the given time:
// TaskPrefix and the 32 hex digits of a UUIDv7. It is New(TaskPrefix, at)
// with the prefix's length known to the compiler. Safe for concurrent use.
func NewTask(at time.Time) string {
	var b [len(TaskPrefix) + 32]byte
	copy(b[:], TaskPrefix)
	encode(b[len(TaskPrefix):], at)
	return string(b[:])
}

// New returns prefix followed by the 32 hex digits of a UUIDv7 (RFC 9562)
// for something created at the given time. Every id of the process, task
// ids included, shares one sequence: ids made one after the other sort in
// that order after their prefix. Safe for concurrent use; it never fails.
func New(prefix string, at time.Time) string {
	if len(prefix) > maxPrefix {
		b := make([]byte, len(prefix)+32)
		copy(b, prefix)
		encode(b[len(prefix):], at)
		return string(b)
	}
	var b [maxPrefix + 32]byte
	n := copy(b[:], prefix)
	encode(b[n:n+32], at)
	return string(b[:n+32])
}

// encode writes the 32 hex digits of a new UUIDv7 to dst: 48 bits of Unix
// milliseconds, a 12-bit sequence that keeps ids made in the same
// millisecond increasing (the RFC's method 1), and 62 random bits from the
// runtime's per-thread ChaCha8 generator, which is seeded from the
// operating system: unique across processes, sortable by creation time,
// without a system call per id.
func encode(dst []byte, at time.Time) {
	var stamp uint64
	for {
		last := lastV7.Load()
		stamp = uint64(at.UnixMilli()) << 12
		if stamp <= last {
			stamp = last + 1 // same (or an earlier) millisecond: count on
		}
		if lastV7.CompareAndSwap(last, stamp) {
			break
		}
	}
	var u [16]byte
	// 48-bit milliseconds, version 7, 12-bit sequence; then variant 10 and
	// 62 random bits.
	binary.BigEndian.PutUint64(u[:8], stamp>>12<<16|0x7000|stamp&0xfff)
	binary.BigEndian.PutUint64(u[8:], rand.Uint64())
	u[8] = 0x80 | u[8]&0x3f // variant 10
	hex.Encode(dst, u[:])
}
