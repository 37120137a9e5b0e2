package bgtask

import (
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// WithTags gives the task free-form tags, kept on its record (TaskMeta.Tags)
// in the given order and never changed after the spawn. Owner.ListTagged,
// Store filters and list_tasks select tasks by tag. A tag is non-empty
// UTF-8 text without control characters or surrounding spaces, of at
// most Caps.MaxTagBytes bytes; a task has at most Caps.MaxTags tags and no
// tag twice. Otherwise the spawn fails with an error
// matching ErrInvalidArgument. Several WithTags add up.
func WithTags(tags ...string) SpawnOption {
	return func(c *spawnConfig) { c.tags = append(c.tags, tags...) }
}

// checkTags reports why tags cannot be a task's, as an ErrInvalidArgument.
func (c *config) checkTags(tags []string) error {
	if len(tags) > c.caps.MaxTags {
		return invalidArgument("%d tags, at most %d", len(tags), c.caps.MaxTags)
	}
	for i, t := range tags {
		switch {
		case t == "":
			return invalidArgument("tag %d is empty", i)
		case len(t) > c.caps.MaxTagBytes:
			return invalidArgument("tag %d longer than %d bytes", i, c.caps.MaxTagBytes)
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
