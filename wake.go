package bgtask

// WakePolicy says which of a task's events reach its owner's inbox, and so
// can wake the owner (everruns' wake policy). Observers see every transition
// whatever the policy. The zero value "" means WakeOnTerminal.
type WakePolicy string

const (
	// WakeSilent: nothing reaches the inbox but commit failures and
	// messages addressed to the owner; the model polls with the tools.
	WakeSilent WakePolicy = "silent"
	// WakeOnTerminal (the default): the terminal event, commit failures and
	// addressed messages. Progress events and input requests are dropped.
	WakeOnTerminal WakePolicy = "on_terminal"
	// WakeOnActivity: every event: terminal, custom (Task.Emit) and input
	// requests.
	WakeOnActivity WakePolicy = "on_activity"
)

// Valid reports whether p is "" or one of the policies above.
func (p WakePolicy) Valid() bool {
	switch p {
	case "", WakeSilent, WakeOnTerminal, WakeOnActivity:
		return true
	}
	return false
}

// String returns the policy's name, "on_terminal" for "".
func (p WakePolicy) String() string {
	if p == "" {
		return string(WakeOnTerminal)
	}
	return string(p)
}

// delivers reports whether an event of kind k (and custom type typ) from a
// task with policy p goes to the owner's inbox.
func (p WakePolicy) delivers(k EventKind, typ string) bool {
	switch {
	case k == EventCommitFailed, k == EventCustom && typ == EventTypeMessage:
		return true // the owner must hear of these whatever the policy
	case p == WakeSilent:
		return false
	case k.IsTerminal():
		return true
	}
	return p == WakeOnActivity
}

// WithWake sets the task's wake policy. Default WakeOnTerminal. An unknown
// policy makes the spawn fail with ErrInvalidWake.
func WithWake(p WakePolicy) SpawnOption { return func(c *spawnConfig) { c.wake = p } }
