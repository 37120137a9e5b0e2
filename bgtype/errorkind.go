package bgtype

// ErrorKind says why a task ended failed or interrupted; it is empty for
// every other status (cancelled is a status, not a kind). A kind read from
// a Store that this version does not know is kept as it is.
type ErrorKind string

// The error kinds.
const (
	// KindError: the function returned an error (or its result could not
	// be encoded, or its start could not be recorded).
	KindError ErrorKind = "error"
	// KindTimeout: the task's time ran out (WithTimeout, WithDeadline) and
	// its function returned an error.
	KindTimeout ErrorKind = "timeout"
	// KindPanic: the function panicked; the record's Stack holds the trace.
	KindPanic ErrorKind = "panic"
	// KindInterrupted: the runtime instance that ran the task is gone.
	KindInterrupted ErrorKind = "interrupted"
)
