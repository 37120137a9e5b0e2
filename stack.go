package bgtask

// growStack makes the calling goroutine's stack grow now, while it is
// shallow, rather than deep inside the commit path (docs/internals.md).
//
//go:noinline
func growStack() {
	var pad [1024]byte
	keep(pad[:])
}

//go:noinline
func keep(b []byte) { _ = b[len(b)-1] }
