package bgtask

import (
	"encoding/hex"

	"github.com/google/uuid"
)

// IDPrefix starts every task id.
const IDPrefix = "task_"

// newTaskID returns "task_" and the 32 hex digits of a UUIDv7: unique across
// processes and sortable by creation time.
func newTaskID() string {
	u := uuid.Must(uuid.NewV7())
	var b [len(IDPrefix) + 32]byte
	copy(b[:], IDPrefix)
	hex.Encode(b[len(IDPrefix):], u[:])
	return string(b[:])
}
