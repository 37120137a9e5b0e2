package bgtype

// WakePolicy says which of a task's events wake its owner. It decides
// waking, not whether an event exists: every custom event (Task.Emit) is
// kept as the task's latest event (Owner.LatestEvent) whatever the policy,
// and reaches the inbox unless the policy is WakeSilent. Observers see every
// transition whatever the policy. The zero value "" means WakeOnTerminal.
type WakePolicy string

const (
	// WakeSilent: nothing reaches the inbox but commit failures and
	// messages addressed to the owner; custom events are kept as the
	// task's latest progress only, and the model polls with the tools.
	WakeSilent WakePolicy = "silent"
	// WakeOnTerminal (the default): the terminal event, commit failures,
	// addressed messages and input requests wake the owner. Other custom
	// events reach the inbox quiet (Event.Quiet): they do not wake a
	// waiting owner, and an undrained one is replaced by the next of the
	// same task and type, so a chatty task keeps one pending event per type.
	WakeOnTerminal WakePolicy = "on_terminal"
	// WakeOnActivity: every event wakes the owner: terminal, custom
	// (Task.Emit) and input requests.
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
