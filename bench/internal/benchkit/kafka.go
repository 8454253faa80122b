package benchkit

import (
	"context"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Produce sends the records rec(i) for i in [from, to) through kc, all
// buffered at once, and waits until each is acknowledged; it stops the
// benchmark on the first error.
func Produce(kc *kgo.Client, from, to int, rec func(i int) *kgo.Record) {
	ctx := context.Background()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for i := from; i < to; i++ {
		wg.Add(1)
		kc.Produce(ctx, rec(i), func(_ *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				firstErr = err
				mu.Unlock()
			}
			wg.Done()
		})
	}
	wg.Wait()
	Must(firstErr, "produce")
}
