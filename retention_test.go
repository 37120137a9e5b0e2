package bgtask

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/internal/memstore"
)

// WithRetention configures the default in-memory store: each field's zero
// keeps the default, a negative value keeps none (or no age limit), and a
// store given with WithStore refuses it.
func TestWithRetention(t *testing.T) {
	tests := []struct {
		name     string
		r        Retention
		tasks    int           // completed tasks of owner "a"
		wait     time.Duration // after the last one ended
		wantKept int
	}{
		{"zero keeps the defaults", Retention{}, 5, time.Hour, 5},
		{"per owner", Retention{PerOwner: 2}, 5, 0, 2},
		{"per owner none", Retention{PerOwner: -1}, 3, 0, 0},
		{"total", Retention{Total: 3}, 5, 0, 2}, // b's record is the third
		{"total none", Retention{Total: -1}, 3, 0, 0},
		{"age", Retention{For: time.Minute}, 3, 2 * time.Minute, 0},
		{"no age limit", Retention{For: -1}, 3, 48 * time.Hour, 3},
		{"default age", Retention{}, 3, 25 * time.Hour, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m := newTestManager(t, WithRetention(tc.r))
				o := m.Owner("a")
				for i := range tc.tasks {
					id := spawnFor(t, m, "a", func(ctx context.Context, tk *Task) (any, error) { return i, nil })
					// a store that keeps none may forget the record before Wait reads it
					if _, err := o.Wait(t.Context(), id); err != nil && !errors.Is(err, ErrNotFound) {
						t.Fatal(err)
					}
				}
				time.Sleep(tc.wait)
				// one more commit, of another owner, runs the age check
				last := spawnFor(t, m, "b", func(ctx context.Context, tk *Task) (any, error) { return nil, nil })
				if _, err := m.Owner("b").Wait(t.Context(), last); err != nil && !errors.Is(err, ErrNotFound) {
					t.Fatal(err)
				}
				if n := len(listTasks(t, o, bgtype.StatusCompleted)); n != tc.wantKept {
					t.Fatalf("owner a keeps %d completed records, want %d", n, tc.wantKept)
				}
				shutdownManager(t, m)
			})
		})
	}
}

func TestWithRetentionAndStore(t *testing.T) {
	_, err := New(WithStore(memstore.New()), WithRetention(Retention{PerOwner: 1}))
	want := "bgtask: invalid argument: WithRetention configures the in-memory store; the store given with WithStore has its own retention options"
	if !errors.Is(err, ErrInvalidArgument) || fmt.Sprint(err) != want {
		t.Fatalf("New = %v, want %q matching ErrInvalidArgument", err, want)
	}
}
