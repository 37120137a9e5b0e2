package bgtype

import "time"

// EventTypeProgress is the event type of the custom event ReportProgress
// emits; its payload is the Progress as JSON.
const EventTypeProgress = "progress"

// Progress is the latest progress a task reported (Task.ReportProgress),
// as its record keeps it: Done out of Total (Total 0: the total is not
// known) and a short message. The message was written by the task: it is
// untrusted text wherever it is shown to a model. At is when it was
// reported; a store never replaces a record's progress with an older one.
type Progress struct {
	Done    int64     `json:"done"`
	Total   int64     `json:"total,omitempty"`
	Message string    `json:"message,omitempty"`
	At      time.Time `json:"at,omitzero"`
}

// Valid reports whether p (nil is valid: no progress) has counts a task
// could report: none negative, Done at most Total when Total is known.
func (p *Progress) Valid() bool {
	return p == nil || p.Done >= 0 && p.Total >= 0 && (p.Total == 0 || p.Done <= p.Total)
}
