package mcmc

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/prismsbi/prism/family"
)

// Voxels is a set of voxel signals to sample: voxel v has the signal
// Signal[v*N : (v+1)*N] (N = the design's length) and the random stream
// ID[v] (normally its linear index in the volume, so that a voxel's
// samples do not depend on which other voxels are in the mask).
type Voxels struct {
	Signal []float64
	ID     []uint64
}

// RunVoxels samples every voxel on workers goroutines (≤ 0: GOMAXPROCS).
// Voxel v uses the stream rand.NewPCG(s.Seed, ID[v]), so the result is the
// same for any number of workers. store is called once per voxel, from the
// worker goroutines, with the voxel's chain (reused afterwards: copy what
// you keep) or the voxel's error (ErrBadData for a voxel that cannot be
// sampled); calls for different voxels may run concurrently. progress, if
// not nil, is called after each voxel with the number of voxels done.
func RunVoxels(d family.Design, s Settings, vox Voxels, workers int, store func(v int, c *Chain, err error), progress func(done int)) error {
	if err := s.Validate(); err != nil {
		return err
	}
	nv := len(vox.ID)
	if len(vox.Signal) != nv*d.N {
		return fmt.Errorf("mcmc: %d signal values for %d voxels of %d measurements", len(vox.Signal), nv, d.N)
	}
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = max(1, min(workers, nv))
	samplers := make([]*Sampler, workers)
	for w := range samplers {
		sm, err := NewSampler(d, s)
		if err != nil {
			return err
		}
		samplers[w] = sm
	}
	var next, done atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func(sm *Sampler) {
			defer wg.Done()
			c := NewChain(s)
			pcg := rand.NewPCG(0, 0)
			r := rand.New(pcg)
			for {
				v := int(next.Add(1) - 1)
				if v >= nv {
					return
				}
				pcg.Seed(s.Seed, vox.ID[v])
				err := sm.Run(vox.Signal[v*d.N:(v+1)*d.N], r, c)
				store(v, c, err)
				if progress != nil {
					progress(int(done.Add(1)))
				}
			}
		}(samplers[w])
	}
	wg.Wait()
	return nil
}
