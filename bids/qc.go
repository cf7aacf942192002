package bids

import (
	"bufio"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"slices"

	"github.com/prismsbi/prism/dmrifit"
	"github.com/prismsbi/prism/internal/atomicfile"
	"github.com/prismsbi/prism/nifti"
	"github.com/prismsbi/prism/plot"
)

// Thumbnails are the middle axial slice of a series, anterior up, each
// voxel drawn as thumbScale×thumbScale pixels:
//
//	b0       mean b≈0 signal, grey, 0 … its 99th percentile in the mask
//	dec      direction-encoded colour of dyads1 (|x|, |y|, |z| as R, G, B)
//	         weighted by mean f1 (full brightness at f1 ≥ 0.5)
//	nfibres  expected number of fibres Σ k P(k | x), viridis from 0 to
//	         the number of sticks
var thumbKinds = []string{"b0", "dec", "nfibres"}

const thumbScale = 3

// ThumbnailName returns the QC thumbnail of kind of the series, relative
// to the output folder.
func ThumbnailName(stem, kind string) string { return filepath.Join(QCDir, stem+"_"+kind+".png") }

func writeThumbnails(out string, s Series, scan *dmrifit.Scan, bpx string) ([]string, error) {
	nx, ny, nz := scan.Nx, scan.Ny, scan.Nz
	z := nz / 2
	nv := nx * ny * nz
	read := func(name string) (*nifti.Volume, error) {
		v, err := nifti.Read(filepath.Join(bpx, name+dmrifit.OutputExt))
		if err != nil {
			return nil, fmt.Errorf("bids: thumbnail: %w", err)
		}
		return v, nil
	}
	dyads, err := read("dyads1")
	if err != nil {
		return nil, err
	}
	f1, err := read("mean_f1samples")
	if err != nil {
		return nil, err
	}
	nf, err := read("nfibres_prob")
	if err != nil {
		return nil, err
	}
	_, _, _, kmax := nf.Shape()
	var inMask []float64
	for i, m := range scan.Mask {
		if m {
			inMask = append(inMask, float64(scan.B0[i]))
		}
	}
	slices.Sort(inMask)
	top := 1.0
	if len(inMask) > 0 && inMask[len(inMask)*99/100] > 0 {
		top = inMask[len(inMask)*99/100]
	}
	colour := map[string]func(i int) color.NRGBA{
		"b0": func(i int) color.NRGBA {
			g := uint8(255 * clamp01(float64(scan.B0[i])/top))
			return color.NRGBA{g, g, g, 255}
		},
		"dec": func(i int) color.NRGBA {
			w := clamp01(float64(f1.Data[i]) / 0.5)
			c := func(k int) uint8 { return uint8(255 * clamp01(math.Abs(float64(dyads.Data[i+k*nv]))*w)) }
			return color.NRGBA{c(0), c(1), c(2), 255}
		},
		"nfibres": func(i int) color.NRGBA {
			if !scan.Mask[i] {
				return color.NRGBA{0, 0, 0, 255}
			}
			var e float64
			for k := range kmax {
				e += float64(k) * float64(nf.Data[i+k*nv])
			}
			return plot.Viridis.Color(e / float64(max(kmax-1, 1)))
		},
	}
	var files []string
	for _, kind := range thumbKinds {
		img := image.NewNRGBA(image.Rect(0, 0, nx*thumbScale, ny*thumbScale))
		for y := range ny {
			for x := range nx {
				c := colour[kind](x + nx*(y+ny*z))
				for dy := range thumbScale {
					for dx := range thumbScale {
						img.SetNRGBA(x*thumbScale+dx, (ny-1-y)*thumbScale+dy, c)
					}
				}
			}
		}
		rel := ThumbnailName(s.Stem, kind)
		path := filepath.Join(out, rel)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, fmt.Errorf("bids: %w", err)
		}
		if err := atomicfile.Write(path, func(w *bufio.Writer) error { return png.Encode(w, img) }); err != nil {
			return nil, fmt.Errorf("bids: %s: %w", path, err)
		}
		files = append(files, rel)
	}
	return files, nil
}

func clamp01(x float64) float64 {
	if !(x > 0) {
		return 0
	}
	return min(x, 1)
}
