package bgtask

import (
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Default caps on a task's tags (WithTagCaps).
const (
	DefaultMaxTags     = 16 // tags on one task
	DefaultMaxTagBytes = 64 // bytes in one tag
)

// WithTags gives the task free-form tags, kept on its record (TaskMeta.Tags)
// in the given order and never changed after the spawn. Owner.ListTagged,
// Store filters and list_tasks select tasks by tag. A tag is non-empty
// UTF-8 text without control characters or surrounding spaces, at most
// the Manager's byte cap; a task has at most the Manager's count cap
// (WithTagCaps) and no tag twice. Otherwise the spawn fails with an error
// matching ErrInvalidArgument. Several WithTags add up.
func WithTags(tags ...string) SpawnOption {
	return func(c *spawnConfig) { c.tags = append(c.tags, tags...) }
}

// WithTagCaps sets how many tags a task may have and how many bytes each
// may hold (WithTags). Zero keeps the default (DefaultMaxTags,
// DefaultMaxTagBytes); a negative value makes New fail.
func WithTagCaps(count, bytes int) Option {
	return func(c *config) { c.tagCount, c.tagBytes = count, bytes }
}

// checkTags reports why tags cannot be a task's, as an ErrInvalidArgument.
func (c *config) checkTags(tags []string) error {
	if len(tags) > c.tagCount {
		return invalidArgument("%d tags, at most %d", len(tags), c.tagCount)
	}
	for i, t := range tags {
		switch {
		case t == "":
			return invalidArgument("tag %d is empty", i)
		case len(t) > c.tagBytes:
			return invalidArgument("tag %d longer than %d bytes", i, c.tagBytes)
		case !utf8.ValidString(t):
			return invalidArgument("tag %d is not UTF-8", i)
		case strings.TrimSpace(t) != t:
			return invalidArgument("tag %q has surrounding spaces", t)
		case strings.IndexFunc(t, unicode.IsControl) >= 0:
			return invalidArgument("tag %q has control characters", t)
		case slices.Contains(tags[:i], t):
			return invalidArgument("tag %q given twice", t)
		}
	}
	return nil
}
