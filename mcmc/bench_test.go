package mcmc

import (
	"math/rand/v2"
	"testing"

	"github.com/prismsbi/prism/family/dmri"
)

// BenchmarkVoxelDefault samples one voxel with BedpostX's defaults (3
// sticks, 1000 + 1250 jumps) on the UKB-like table (105 measurements, close
// to the 102 of the mrtrix3 slab); one op = one voxel on one core.
func BenchmarkVoxelDefault(b *testing.B) {
	des := dmri.UKBDesign()
	s := DefaultSettings()
	r := rand.New(rand.NewPCG(1, 1))
	y := randomTwoFibre(r).noisy(des, 30, r)
	sm, err := NewSampler(des, s)
	if err != nil {
		b.Fatal(err)
	}
	c := NewChain(s)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if err := sm.Run(y, rand.New(rand.NewPCG(1, uint64(i))), c); err != nil {
			b.Fatal(err)
		}
	}
}
