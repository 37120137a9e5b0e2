package bgtask

import (
	"encoding/binary"
	"encoding/hex"
	"math/rand/v2"
	"sync/atomic"
	"time"
)

// IDPrefix starts every task id.
const IDPrefix = "task_"

// lastV7 is the last (unix milliseconds << 12 | sequence) handed out, so
// ids made in one process sort in creation order even within a millisecond.
var lastV7 atomic.Uint64

// newTaskID returns "task_" and the 32 hex digits of a UUIDv7 (RFC 9562) for
// a task created at the given time:
// 48 bits of Unix milliseconds, a 12-bit sequence that keeps ids made in the
// same millisecond increasing (the RFC's method 1), and 62 random bits from
// the runtime's per-thread ChaCha8 generator, which is seeded from the
// operating system: unique across processes, sortable by creation time,
// without a system call per id.
func newTaskID(at time.Time) string {
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
	var b [len(IDPrefix) + 32]byte
	copy(b[:], IDPrefix)
	hex.Encode(b[len(IDPrefix):], u[:])
	return string(b[:])
}
