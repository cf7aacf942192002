package dmrifit

import (
	"context"
	"runtime"
	"sync"

	"github.com/prismsbi/prism/engine/kernels"
)

// parallelJobs runs job(0), …, job(n−1) on up to GOMAXPROCS goroutines,
// each with its kernels inline (kernels.LimitParallelism(1)), taking the
// jobs in order. A job returns how many items it did; progress, if not
// nil, gets the running total after each successful job. It stops taking
// jobs after the first error, which it returns, or when ctx is cancelled
// (ctx.Err()). Jobs must write disjoint results: their order of
// completion is not fixed.
func parallelJobs(ctx context.Context, n int, job func(i int) (int, error), progress func(done int)) error {
	workers := min(runtime.GOMAXPROCS(0), n)
	if workers > 1 {
		kernels.LimitParallelism(1)
		defer kernels.UnlimitParallelism(1)
	}
	var (
		mu       sync.Mutex
		done     int
		firstErr error
		next     int
		wg       sync.WaitGroup
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				if firstErr != nil || next >= n {
					mu.Unlock()
					return
				}
				if err := ctx.Err(); err != nil {
					firstErr = err
					mu.Unlock()
					return
				}
				i := next
				next++
				mu.Unlock()
				k, err := job(i)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				done += k
				d := done
				mu.Unlock()
				if err == nil && progress != nil {
					progress(d)
				}
			}
		}()
	}
	wg.Wait()
	return firstErr
}
