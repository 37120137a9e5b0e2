package stackgrow

// Grow makes the calling goroutine's stack grow now, while few frames are
// on it, rather than later deep inside a call chain: a 1 KiB frame that
// the compiler can neither inline nor drop. It has no other effect, and it
// is safe to call from any goroutine.
//
//go:noinline
func Grow() {
	var pad [1024]byte
	keep(pad[:])
}

// keep uses b, so that the frame of Grow is really there.
//
//go:noinline
func keep(b []byte) { _ = b[len(b)-1] }
