package nifti

import (
	"encoding/binary"
	"path/filepath"
	"strings"
	"testing"
)

// TestAccessors checks At, Set, Frame, Voxel and SetVoxel against the
// NIfTI layout offset x + nx·(y + ny·(z + nz·t)).
func TestAccessors(t *testing.T) {
	v, err := New(Float32, 3, 4, 5, 6)
	if err != nil {
		t.Fatal(err)
	}
	for i := range v.Data {
		v.Data[i] = float32(i)
	}
	nx, ny, nz, nt := v.Shape()
	if nx != 3 || ny != 4 || nz != 5 || nt != 6 || v.NumVoxels() != 60 || v.Len() != 360 {
		t.Fatalf("shape %d %d %d %d", nx, ny, nz, nt)
	}
	for tt := range nt {
		frame := v.Frame(tt)
		for z := range nz {
			for y := range ny {
				for x := range nx {
					off := x + nx*(y+ny*(z+nz*tt))
					if v.At(x, y, z, tt) != float32(off) || frame[v.Index(x, y, z)] != float32(off) {
						t.Fatalf("At(%d,%d,%d,%d) = %v, want %d", x, y, z, tt, v.At(x, y, z, tt), off)
					}
				}
			}
		}
	}
	i := v.Index(2, 1, 3)
	series := v.Voxel(i)
	for tt, x := range series {
		if x != float32(i+60*tt) {
			t.Fatalf("Voxel(%d)[%d] = %v", i, tt, x)
		}
	}
	v.SetVoxel(i, []float32{-1, -2, -3, -4, -5, -6})
	v.Set(0, 0, 0, 5, 42)
	if v.At(2, 1, 3, 4) != -5 || v.Data[300] != 42 {
		t.Fatal("SetVoxel/Set did not store")
	}
	mustPanic(t, "At out of range", func() { v.At(3, 0, 0, 0) })
	mustPanic(t, "At negative", func() { v.At(0, -1, 0, 0) })
	mustPanic(t, "Voxel out of range", func() { v.Voxel(60) })
	mustPanic(t, "VoxelInto wrong length", func() { v.VoxelInto(make([]float32, 5), 0) })

	for _, bad := range [][]int{{}, {1, 2, 3, 4, 5, 6, 7, 8}, {3, 0}, {-1}} {
		if _, err := New(Float32, bad...); err == nil {
			t.Errorf("New(%v) succeeded", bad)
		}
	}
	if _, err := New(Datatype(32), 2); err == nil {
		t.Error("New with complex64 succeeded")
	}
}

func mustPanic(t *testing.T, name string, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Errorf("%s: no panic", name)
		}
	}()
	f()
}

// TestNewLike checks that derived 3-D and 4-D maps keep the reference
// grid and transforms through a write and read.
func TestNewLike(t *testing.T) {
	vals := fill([]float64{1, 2, 3}, 48)
	ref, err := Decode("ref.nii", buildImage(geometryImage(1, binary.LittleEndian, Int16, []int64{3, 2, 2, 4}, vals)))
	if err != nil {
		t.Fatal(err)
	}
	for _, dims := range [][]int{nil, {3, 2, 2}, {3, 2, 2, 50}} {
		m, err := NewLike(&ref.Header, Float32, dims...)
		if err != nil {
			t.Fatal(err)
		}
		for i := range m.Data {
			m.Data[i] = 0.5 * float32(i)
		}
		path := filepath.Join(t.TempDir(), "map.nii.gz")
		if err := Write(path, m); err != nil {
			t.Fatal(err)
		}
		w, err := Read(path)
		if err != nil {
			t.Fatal(err)
		}
		wantND := max(3, len(dims))
		if w.NDim() != wantND || w.Dim[1] != 3 || w.Dim[2] != 2 || w.Dim[3] != 2 || w.Datatype != Float32 {
			t.Fatalf("dims %v datatype %v", w.Dim, w.Datatype)
		}
		if w.VoxelToWorld() != ref.VoxelToWorld() || w.QformMatrix() != ref.QformMatrix() || w.FSLFlipX() != ref.FSLFlipX() {
			t.Fatalf("geometry changed:\n%v\n%v", w.VoxelToWorld(), ref.VoxelToWorld())
		}
		if w.QformCode != ref.QformCode || w.SformCode != ref.SformCode || w.SpatialUnits() != UnitsMM || w.TimeUnits() != UnitsUnknown {
			t.Fatalf("codes %v %v units %v %v", w.QformCode, w.SformCode, w.SpatialUnits(), w.TimeUnits())
		}
		if w.Pixdim[4] != 1 || w.SclSlope != 1 || w.SclInter != 0 {
			t.Fatalf("pixdim %v slope %v inter %v", w.Pixdim, w.SclSlope, w.SclInter)
		}
		checkData(t, w.Data, m.Data)
	}
	if _, err := NewLike(&ref.Header, Float32, 3, 2, 5); err == nil || !strings.Contains(err.Error(), "3×2×2") {
		t.Fatalf("grid mismatch: %v", err)
	}
}
