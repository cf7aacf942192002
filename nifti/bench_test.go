package nifti

import (
	"bytes"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"
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
	loop(b, v.VoxOffset+v.dataBytes(), func() error { _, err := Read(largestScan); return err })
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
			loop(b, 352+v.dataBytes(), func() error { return Write(path, v) })
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
	for _, level := range []int{1, 6} {
		b.Run(fmt.Sprintf("parallel/level%d", level), func(b *testing.B) {
			var n int
			loop(b, int64(len(img)), func() error {
				var buf bytes.Buffer
				err := writeGzip(&buf, img, level)
				n = buf.Len()
				return err
			})
			b.ReportMetric(float64(n)/float64(len(img)), "ratio")
		})
	}
	b.Run("sequential/level-1", func(b *testing.B) {
		loop(b, int64(len(img)), func() error { gzipBytes(b, img); return nil })
	})
	b.Run("decode", func(b *testing.B) {
		gz := gzipBytes(b, img)
		loop(b, int64(len(img)), func() error { _, err := Decode("x.nii.gz", gz); return err })
	})
}

// cpuTime returns the CPU time (user + system) used by the process so far,
// so benchmarks can report their cost independently of other load on the
// machine; wall-clock MB/s only equals CPU-bound throughput on an idle
// machine.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// loop runs f b.N times and reports the CPU time per op and the data rate
// per CPU-second ("cpuMB/s": what one fully available core would achieve;
// parallel work counts the time of every core).
func loop(b *testing.B, bytes int64, f func() error) {
	b.SetBytes(bytes)
	c0 := cpuTime()
	for b.Loop() {
		if err := f(); err != nil {
			b.Fatal(err)
		}
	}
	cpu := (cpuTime() - c0).Seconds() / float64(b.N)
	b.ReportMetric(cpu*1e3, "cpu-ms/op")
	b.ReportMetric(float64(bytes)/1e6/cpu, "cpuMB/s")
}
