package nifti

import (
	"bytes"
	"fmt"
	"io"
	"path/filepath"
	"testing"
)

// largestScan is the largest real scan in the shared data (8.5 MB of
// int16 voxels, 3.4 MB compressed).
const largestScan = dataDir + "/xa30-prisma-b2500-wholebrain/dwi_PA.nii.gz"

// BenchmarkRead reads the largest real scan; MB/s counts decompressed
// header and voxel bytes.
func BenchmarkRead(b *testing.B) {
	skipWithoutData(b)
	v, err := Read(largestScan)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(v.VoxOffset + v.dataBytes())
	for b.Loop() {
		if _, err := Read(largestScan); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWrite writes the largest real scan as .nii.gz (int16, parallel
// gzip at the default level, temp file + fsync + rename) and as .nii.
func BenchmarkWrite(b *testing.B) {
	skipWithoutData(b)
	v, err := Read(largestScan)
	if err != nil {
		b.Fatal(err)
	}
	for _, name := range []string{"out.nii.gz", "out.nii"} {
		b.Run(name, func(b *testing.B) {
			path := filepath.Join(b.TempDir(), name)
			b.SetBytes(352 + v.dataBytes())
			for b.Loop() {
				if err := Write(path, v); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkGzip compares compression levels and the sequential
// compress/gzip on the encoded largest scan, in memory.
func BenchmarkGzip(b *testing.B) {
	skipWithoutData(b)
	v, err := Read(largestScan)
	if err != nil {
		b.Fatal(err)
	}
	img, err := encode(v)
	if err != nil {
		b.Fatal(err)
	}
	for _, level := range []int{1, 2, 3, 4, 5, 6} {
		b.Run(fmt.Sprintf("parallel/level%d", level), func(b *testing.B) {
			b.SetBytes(int64(len(img)))
			var n int
			for b.Loop() {
				var buf bytes.Buffer
				if err := writeGzip(&buf, img, level); err != nil {
					b.Fatal(err)
				}
				n = buf.Len()
			}
			b.ReportMetric(float64(n)/float64(len(img)), "ratio")
		})
	}
	b.Run("sequential/level-1", func(b *testing.B) {
		b.SetBytes(int64(len(img)))
		for b.Loop() {
			gzipBytes(b, img)
		}
	})
	b.Run("decode", func(b *testing.B) {
		gz := gzipBytes(b, img)
		b.SetBytes(int64(len(img)))
		for b.Loop() {
			if _, err := Decode("x.nii.gz", gz); err != nil {
				b.Fatal(err)
			}
		}
	})
	_ = io.Discard
}
