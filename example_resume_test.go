package bgtask_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/bgtask/bgtask"
)

// CrawlSpec is what a crawl is spawned with; it is kept on the record.
type CrawlSpec struct {
	URL   string `json:"url"`
	Pages int    `json:"pages"`
}

// CrawlCursor is what an attempt saves: the next page to fetch. Bigger
// state belongs in the host's storage, the cursor pointing to it.
type CrawlCursor struct {
	Next int `json:"next"`
}

// fetched lists the pages fetched; the first fetch of page 3 fails.
var (
	fetched []int
	flaked  bool
)

// fetch fetches one page. key is the same in every attempt: the outside
// system deduplicates on it a page fetched before a crash but after the
// last checkpoint.
func fetch(_ context.Context, _ string, page int, key string) error {
	if page == 3 && !flaked {
		flaked = true
		return errors.New("503 from the server")
	}
	fetched = append(fetched, page)
	return nil
}

func Example_readmeResumable() {
	fetched, flaked = nil, false // the example may run more than once in a test binary
	crawlKind, err := bgtask.NewKind("crawl/v1", func(ctx context.Context, t *bgtask.Task, spec CrawlSpec, cp *bgtask.Checkpoint[CrawlCursor]) (any, error) {
		cur, _ := cp.Last() // the zero cursor on a first attempt
		for page := max(cur.Next, 1); page <= spec.Pages; page++ {
			select {
			case <-t.Draining(): // a deploy: another process goes on from the checkpoint
				return nil, bgtask.ErrYield
			default:
			}
			if err := fetch(ctx, spec.URL, page, t.StepKey(fmt.Sprint("page-", page))); err != nil {
				return nil, err // the next attempt starts from the checkpoint (3 attempts by default)
			}
			if err := cp.Save(ctx, CrawlCursor{Next: page + 1}); err != nil {
				return nil, err // ErrSuperseded: another attempt took over
			}
		}
		return fmt.Sprintf("%d pages", spec.Pages), nil
	}, bgtask.KindConfig{Retry: bgtask.RetryPolicy{InitialBackoff: time.Millisecond}})
	if err != nil {
		panic(err)
	}
	// With a sqlitestore or a pgstore (WithStore), the crawl also survives
	// a crash: the next process that registers crawl/v1 resumes it.
	m, err := bgtask.New(bgtask.WithKinds(crawlKind))
	if err != nil {
		panic(err)
	}
	defer m.Shutdown(context.Background())
	ctx := context.Background()
	id, err := crawlKind.Spawn(ctx, m.Owner("thread-1"), CrawlSpec{URL: "https://example.com", Pages: 4})
	if err != nil {
		panic(err)
	}
	meta, _ := m.Wait(ctx, id)
	fmt.Println(meta.Status, string(meta.Result), "after", meta.Attempt, "attempts; last error:", meta.Resume.LastError)
	fmt.Println("pages fetched:", fetched, "checkpoint:", string(meta.Resume.Checkpoint))
	// Output:
	// completed "4 pages" after 2 attempts; last error: 503 from the server
	// pages fetched: [1 2 3 4] checkpoint: {"next":5}
}
