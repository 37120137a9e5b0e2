package pgstore_test

import (
	"slices"
	"testing"

	"github.com/bgtask/bgtask/store/pgstore"
)

// A transaction locks its counts first only when its statements would
// take them out of order: never for one statement, nor for owners that
// ascend across statements or were held already.
func TestPrelockOwners(t *testing.T) {
	for _, c := range []struct {
		name  string
		held  []string
		stmts [][]string
		want  []string
	}{
		{"no statement", nil, [][]string{nil, nil, nil}, nil},
		{"one statement", nil, [][]string{nil, {"b", "a", "c"}, nil}, nil},
		{"ascending", nil, [][]string{{"a"}, {"b", "c"}, {"d"}}, nil},
		{"equal owners", nil, [][]string{{"a", "b"}, {"b", "a"}}, nil},
		{"later owner held", nil, [][]string{{"a", "c"}, {"a", "d"}}, nil},
		{"insert b, update a", nil, [][]string{{"b"}, {"a"}}, []string{"a", "b"}},
		{"update b, insert a", nil, [][]string{{"b"}, {"a"}, nil}, []string{"a", "b"}},
		{"one below", nil, [][]string{{"a", "c"}, {"b", "d", "a"}}, []string{"a", "b", "c", "d"}},
		{"delete below", nil, [][]string{{"b"}, nil, {"a", "a"}}, []string{"a", "b"}},
		{"byte order", nil, [][]string{{"a"}, {"B"}}, []string{"B", "a"}},
		{"after held, ascending", []string{"a", "c"}, [][]string{{"d"}, {"c", "e"}}, nil},
		{"after held, one statement", []string{"a"}, [][]string{{"b"}}, nil},
		{"after held, out of order", []string{"a"}, [][]string{{"c"}, {"a", "b"}}, []string{"b", "c"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := pgstore.PrelockOwners(c.held, c.stmts...); !slices.Equal(got, c.want) {
				t.Errorf("PrelockOwners(%q, %q) = %q, want %q", c.held, c.stmts, got, c.want)
			}
		})
	}
}
