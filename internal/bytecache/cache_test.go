package bytecache

import (
	"fmt"
	"slices"
	"sync"
	"testing"
)

func lenOf(s string) int64 { return int64(len(s)) }

// kept lists the ids c keeps, sorted.
func kept(c *Cache[string]) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ids []string
	for id := range c.byID {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

func TestCache(t *testing.T) {
	type put struct {
		id, v string
		kept  bool
	}
	tests := []struct {
		name  string
		max   int64
		puts  []put
		del   string
		want  []string
		bytes int64
	}{
		{"within the bound", 10, []put{{"a", "xxx", true}, {"b", "yyy", true}}, "", []string{"a", "b"}, 6},
		{"oldest forgotten first", 6, []put{{"a", "xxx", true}, {"b", "yyy", true}, {"c", "zz", true}}, "", []string{"b", "c"}, 5},
		{"larger than the bound alone: not kept, others stay", 4, []put{{"a", "xx", true}, {"b", "yyyyy", false}}, "", []string{"a"}, 2},
		{"a replaced value is not forgotten by its old slot", 6, []put{{"a", "xx", true}, {"b", "yy", true}, {"a", "aa", true}, {"c", "cc", true}, {"d", "dd", true}}, "", []string{"a", "c", "d"}, 6},
		{"replacing with one too large forgets the old", 4, []put{{"a", "xx", true}, {"a", "yyyyy", false}}, "", nil, 0},
		{"deleted", 10, []put{{"a", "xx", true}, {"b", "yy", true}}, "a", []string{"b"}, 2},
		{"a zero bound keeps nothing", 0, []put{{"a", "x", false}}, "", nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := New(tt.max, lenOf)
			for _, p := range tt.puts {
				if got := c.Put(p.id, p.v); got != p.kept {
					t.Fatalf("Put(%q, %q) = %v, want %v", p.id, p.v, got, p.kept)
				}
			}
			if tt.del != "" {
				c.Delete(tt.del)
			}
			if got := kept(c); !slices.Equal(got, tt.want) {
				t.Errorf("kept %q, want %q", got, tt.want)
			}
			if _, b := c.Len(); b != tt.bytes {
				t.Errorf("%d bytes, want %d", b, tt.bytes)
			}
			for _, id := range tt.want {
				if _, ok := c.Get(id); !ok {
					t.Errorf("Get(%q) found nothing", id)
				}
			}
		})
	}
}

// Replacing one id over and over keeps the slot list short.
func TestCacheSlotsCompacted(t *testing.T) {
	c := New(100, lenOf)
	for i := range 10_000 {
		c.Put("a", fmt.Sprint(i%10))
	}
	if n := len(c.order); n > 2*1+16+1 {
		t.Errorf("%d slots for one entry", n)
	}
	if v, _ := c.Get("a"); v != "9" {
		t.Errorf("Get = %q, want 9", v)
	}
}

func TestCacheConcurrent(t *testing.T) {
	c := New(64, lenOf)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 1000 {
				id := fmt.Sprint(g, "-", i%20)
				c.Put(id, "12345678")
				c.Get(id)
				if i%7 == 0 {
					c.Delete(id)
				}
			}
		})
	}
	wg.Wait()
	if _, b := c.Len(); b > 64 {
		t.Errorf("%d bytes kept, bound 64", b)
	}
}
