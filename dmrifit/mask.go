package dmrifit

import "math"

// AutoMask returns a simple brain mask from the mean b0 image (x fastest,
// nx×ny×nz): voxels above Otsu's threshold of log b0 over the finite
// positive values (the threshold that maximises the between-class variance
// of a 256-bin histogram; on the log scale so that the bright CSF does not
// pull the threshold into the tissue), reduced to the largest 6-connected
// component, with enclosed holes (background not 6-connected to the
// grid's border) filled.
// It is meant for quick runs without a mask; a mask from a dedicated tool
// (FSL bet, MRtrix dwi2mask) is better.
func AutoMask(b0 []float32, nx, ny, nz int) []bool {
	n := nx * ny * nz
	mask := make([]bool, n)
	logb := make([]float64, n)
	lo, hi := math.Inf(1), math.Inf(-1)
	for i, v := range b0 {
		x := float64(v)
		logb[i] = math.NaN()
		if x > 0 && !math.IsInf(x, 0) {
			logb[i] = math.Log(x)
			lo, hi = math.Min(lo, logb[i]), math.Max(hi, logb[i])
		}
	}
	if !(hi > lo) {
		for i, v := range logb {
			mask[i] = !math.IsNaN(v)
		}
		return mask
	}
	thr := otsu(logb, lo, hi)
	for i, v := range logb {
		mask[i] = v > thr
	}
	mask = largestComponent(mask, nx, ny, nz)
	fillHoles(mask, nx, ny, nz)
	return mask
}

// otsu returns the threshold maximising the between-class variance of the
// non-NaN values of v in [lo, hi] (256 bins).
func otsu(v []float64, lo, hi float64) float64 {
	const bins = 256
	var hist [bins]float64
	width := (hi - lo) / bins
	var total, sum float64
	for _, f := range v {
		if math.IsNaN(f) {
			continue
		}
		k := min(bins-1, int((f-lo)/width))
		hist[k]++
		total++
		sum += (float64(k) + 0.5)
	}
	var w0, s0, best float64
	bestK := 0
	for k := 0; k < bins-1; k++ {
		w0 += hist[k]
		s0 += hist[k] * (float64(k) + 0.5)
		w1 := total - w0
		if w0 == 0 || w1 == 0 {
			continue
		}
		m0, m1 := s0/w0, (sum-s0)/w1
		if between := w0 * w1 * (m0 - m1) * (m0 - m1); between > best {
			best, bestK = between, k
		}
	}
	return lo + float64(bestK+1)*width
}

// neighbours6 calls f with the linear indices of the 6-neighbours of i.
func neighbours6(i, nx, ny, nz int, f func(j int)) {
	x, y, z := i%nx, (i/nx)%ny, i/(nx*ny)
	if x > 0 {
		f(i - 1)
	}
	if x < nx-1 {
		f(i + 1)
	}
	if y > 0 {
		f(i - nx)
	}
	if y < ny-1 {
		f(i + nx)
	}
	if z > 0 {
		f(i - nx*ny)
	}
	if z < nz-1 {
		f(i + nx*ny)
	}
}

// largestComponent keeps the largest 6-connected component of mask.
func largestComponent(mask []bool, nx, ny, nz int) []bool {
	label := make([]int32, len(mask))
	var sizes []int
	stack := []int{}
	for i, on := range mask {
		if !on || label[i] != 0 {
			continue
		}
		id := int32(len(sizes) + 1)
		size := 0
		label[i] = id
		stack = append(stack[:0], i)
		for len(stack) > 0 {
			c := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			size++
			neighbours6(c, nx, ny, nz, func(j int) {
				if mask[j] && label[j] == 0 {
					label[j] = id
					stack = append(stack, j)
				}
			})
		}
		sizes = append(sizes, size)
	}
	best := int32(0)
	for k, sz := range sizes {
		if best == 0 || sz > sizes[best-1] {
			best = int32(k + 1)
		}
	}
	out := make([]bool, len(mask))
	for i, l := range label {
		out[i] = l != 0 && l == best
	}
	return out
}

// fillHoles sets every background voxel that is not 6-connected to the
// border of the grid.
func fillHoles(mask []bool, nx, ny, nz int) {
	outside := make([]bool, len(mask))
	var stack []int
	for i := range mask {
		x, y, z := i%nx, (i/nx)%ny, i/(nx*ny)
		border := x == 0 || y == 0 || z == 0 || x == nx-1 || y == ny-1 || z == nz-1
		if border && !mask[i] {
			outside[i] = true
			stack = append(stack, i)
		}
	}
	for len(stack) > 0 {
		c := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		neighbours6(c, nx, ny, nz, func(j int) {
			if !mask[j] && !outside[j] {
				outside[j] = true
				stack = append(stack, j)
			}
		})
	}
	for i := range mask {
		if !outside[i] {
			mask[i] = true
		}
	}
}
