package store

import (
	"cmp"
	"context"
	"iter"
	"slices"

	"github.com/bgtask/bgtask/bgtype"
)

// SortMetas orders records oldest first: by CreatedAt, then by ID. It is
// the order of Store.List and Store.Children.
func SortMetas(ms []bgtype.TaskMeta) {
	slices.SortFunc(ms, func(a, b bgtype.TaskMeta) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID))
	})
}

// ListTagged yields the owner's records that carry tag (every record when
// tag is empty) and have one of statuses (all when none is given), in the
// order and with the errors of Store.List. It uses the store's own filter
// when s is a TagLister.
func ListTagged(ctx context.Context, s Store, owner, tag string, statuses ...bgtype.Status) iter.Seq2[bgtype.TaskMeta, error] {
	if tl, ok := s.(TagLister); ok {
		return tl.ListTagged(ctx, owner, tag, statuses...)
	}
	seq := s.List(ctx, owner, statuses...)
	if tag == "" {
		return seq
	}
	return func(yield func(bgtype.TaskMeta, error) bool) {
		for m, err := range seq {
			if err == nil && !slices.Contains(m.Tags, tag) {
				continue
			}
			if !yield(m, err) {
				return
			}
		}
	}
}
