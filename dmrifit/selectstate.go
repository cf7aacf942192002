package dmrifit

import (
	"encoding/binary"
	"math"
)

// The partial state of a model-selection fit (SelectFitter) has the
// layout of the ball-and-sticks state (fitstate.go) with its own magic
// line; a record holds the voxels [start, start+n) of every per-voxel
// array of Selection, as float32 (MAP as its int32 bits) and the stick
// activity as bytes.
const selectStateMagicLine = "prism dmri select state 1\n"

// SelectState is an open state file of a model-selection fit.
type SelectState struct {
	*recordFile
}

// OpenSelectState opens (or creates) the state file at path for a run
// identified by key, as OpenFitState, and decodes its complete records
// into a (which covers the whole scan); Done reports how many voxels,
// from the first, they hold.
func OpenSelectState(path string, key []byte, a *Selection, fresh bool) (*SelectState, error) {
	rf, err := openRecordFile(path, selectStateMagicLine, key, recordCodec{payload: a.payload, take: a.unmarshalRange}, fresh)
	if err != nil {
		return nil, err
	}
	return &SelectState{rf}, nil
}

// Append writes voxels [start, start+n) of a as a record and syncs the
// file; records must follow each other without gaps.
func (st *SelectState) Append(a *Selection, start, n int) error {
	return st.append(start, n, a.marshalRange(start, n))
}

// rangeArrays returns views of the float32 arrays of voxels [start,
// start+n), in record order, and of the stick activity.
func (a *Selection) rangeArrays(start, n int) ([][]float32, [][]bool) {
	per := func(x []float32, k int) []float32 { return x[start*k : (start+n)*k] }
	C, K, S := a.Components, len(a.ClassProb)/max(a.N, 1), a.Samples
	f := [][]float32{per(a.ModelMass, 1), per(a.MAPProb, 1), per(a.CompProb, C), per(a.ClassProb, K),
		per(a.Pred, a.Meas), per(a.PPRMSE, 1), per(a.StickD, S)}
	if a.ModelProb != nil {
		f = append(f, per(a.ModelProb, len(a.ModelProb)/a.N))
	}
	if a.CorrESS != nil {
		f = append(f, per(a.CorrESS, 1), per(a.CorrSteps, 1), per(a.CorrLogZSE, 1), per(a.CorrFailed, 1), per(a.CorrClasses, 1))
	}
	var act [][]bool
	for i := range a.F {
		if a.F[i] == nil {
			continue
		}
		f = append(f, per(a.F[i], S), per(a.Theta[i], S), per(a.Phi[i], S))
		act = append(act, a.Active[i][start*S:(start+n)*S])
	}
	return f, act
}

// payload is the record length of n voxels: the lengths of one voxel's
// views, 4 bytes per float32 (and MAP), 1 per activity flag.
func (a *Selection) payload(n int) int {
	f, act := a.rangeArrays(0, 1)
	size := 4 // MAP
	for _, x := range f {
		size += 4 * len(x)
	}
	for _, x := range act {
		size += len(x)
	}
	return n * size
}

func (a *Selection) marshalRange(start, n int) []byte {
	p := make([]byte, 0, a.payload(n))
	for _, m := range a.MAP[start : start+n] {
		p = binary.LittleEndian.AppendUint32(p, uint32(m))
	}
	f, act := a.rangeArrays(start, n)
	for _, x := range f {
		for _, v := range x {
			p = binary.LittleEndian.AppendUint32(p, math.Float32bits(v))
		}
	}
	for _, x := range act {
		for _, on := range x {
			b := byte(0)
			if on {
				b = 1
			}
			p = append(p, b)
		}
	}
	return p
}

func (a *Selection) unmarshalRange(start, n int, p []byte) {
	off := 0
	for i := range n {
		a.MAP[start+i] = int32(binary.LittleEndian.Uint32(p[off:]))
		off += 4
	}
	f, act := a.rangeArrays(start, n)
	for _, x := range f {
		for k := range x {
			x[k] = math.Float32frombits(binary.LittleEndian.Uint32(p[off:]))
			off += 4
		}
	}
	for _, x := range act {
		for k := range x {
			x[k] = p[off] != 0
			off++
		}
	}
}
