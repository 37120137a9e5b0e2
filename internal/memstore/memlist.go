package memstore

import (
	"context"
	"fmt"
	"iter"
	"slices"

	"github.com/bgtask/bgtask/bgtype"
	"github.com/bgtask/bgtask/store"
)

// List implements Store.
func (s *Store) List(ctx context.Context, owner string, statuses ...bgtype.Status) iter.Seq2[bgtype.TaskMeta, error] {
	return s.ListTagged(ctx, owner, "", statuses...)
}

// ListTagged implements TagLister. It walks the owner's records.
func (s *Store) ListTagged(ctx context.Context, owner, tag string, statuses ...bgtype.Status) iter.Seq2[bgtype.TaskMeta, error] {
	return func(yield func(bgtype.TaskMeta, error) bool) {
		if err := CheckStatuses(statuses); err != nil {
			yield(bgtype.TaskMeta{}, err)
			return
		}
		if err := ctx.Err(); err != nil {
			yield(bgtype.TaskMeta{}, err)
			return
		}
		var all []bgtype.TaskMeta
		s.each(owner, func(e *Entry) { all = append(all, e.get()) })
		out := all[:0]
		for _, m := range dedupNewest(all) {
			if (len(statuses) == 0 || slices.Contains(statuses, m.Status)) && (tag == "" || slices.Contains(m.Tags, tag)) {
				out = append(out, m)
			}
		}
		yieldSorted(out, yield)
	}
}

// Children implements Store. It walks every record: the in-memory store keeps
// no parent index, since the Manager answers lineage questions from its
// own live index.
func (s *Store) Children(ctx context.Context, id string) iter.Seq2[bgtype.TaskMeta, error] {
	return func(yield func(bgtype.TaskMeta, error) bool) {
		if err := ctx.Err(); err != nil {
			yield(bgtype.TaskMeta{}, err)
			return
		}
		var out []bgtype.TaskMeta
		for i := range s.shards {
			sh := &s.shards[i]
			sh.mu.RLock()
			for _, e := range sh.byID {
				if id != "" && e.parentID() == id {
					out = append(out, e.get())
				}
			}
			sh.mu.RUnlock()
		}
		yieldSorted(out, yield)
	}
}

// CheckStatuses reports the first status of a filter this package does not know.
func CheckStatuses(statuses []bgtype.Status) error {
	for _, st := range statuses {
		if !st.Valid() {
			return fmt.Errorf("%w: %q", bgtype.ErrInvalidStatus, st)
		}
	}
	return nil
}

// dedupNewest drops, of two copies of a record (Store.each may see a
// record live and then terminal), the first one.
func dedupNewest(ms []bgtype.TaskMeta) []bgtype.TaskMeta {
	if len(ms) < 2 {
		return ms
	}
	seen := make(map[string]int, len(ms))
	out := ms[:0]
	for _, m := range ms {
		if i, ok := seen[m.ID]; ok {
			out[i] = m
			continue
		}
		seen[m.ID] = len(out)
		out = append(out, m)
	}
	return out
}

func yieldSorted(ms []bgtype.TaskMeta, yield func(bgtype.TaskMeta, error) bool) {
	store.SortMetas(ms)
	for _, m := range ms {
		if !yield(m, nil) {
			return
		}
	}
}
