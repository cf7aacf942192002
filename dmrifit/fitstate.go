package dmrifit

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
)

// The partial state of `prism dmri fit` is one file in the output folder:
//
//	"prism dmri fit state 2\n"
//	key (one line of JSON: settings, network hash, inputs, voxel count)
//	records, one per finished batch:
//	    magic u32, start u32, n u32, payload length u32, payload, CRC-32 u32
//
// all little-endian, the CRC (IEEE) over the 16 header bytes and the
// payload. Each record is appended and fsynced before the next batch
// starts, so after a crash (kill -9, power loss) the file holds whole
// records plus at most one torn record at the end, which the next run
// detects by its length or CRC and truncates.
const (
	stateMagicLine = "prism dmri fit state 2\n"
	recordMagic    = 0x42544650 // "PFTB"
)

// recordFile is the append-only file of batch records behind FitState
// (ball-and-sticks fits) and SelectState (model-selection fits): a magic
// line, the run's key and whole records, each appended and fsynced.
type recordFile struct {
	f    *os.File
	path string
	// done is the number of voxels of the complete records.
	done int
}

// recordCodec decodes a record kind: payload(n) is the payload length of
// n voxels, take stores a decoded record.
type recordCodec struct {
	payload func(n int) int
	take    func(start, n int, payload []byte)
}

// openRecordFile opens (or creates) a record file at path whose head is
// magic + key. An existing file with another head is an error unless
// fresh is set, in which case it is replaced, as it is when fresh is set
// and the head matches. The complete records are passed to c.take in
// order; a torn last record is cut off.
func openRecordFile(path, magic string, key []byte, c recordCodec, fresh bool) (*recordFile, error) {
	key = bytes.TrimSpace(key)
	if bytes.ContainsRune(key, '\n') {
		return nil, errors.New("dmri: state key must be one line")
	}
	head := []byte(magic + string(key) + "\n")
	rf := &recordFile{path: path}
	if !fresh {
		data, err := os.ReadFile(path)
		switch {
		case err == nil:
			if !bytes.HasPrefix(data, head) {
				return nil, fmt.Errorf("%w (%s); rerun with --fresh to discard it or choose another --out", errStateMismatch, path)
			}
			good := rf.decode(data[len(head):], c)
			f, err := os.OpenFile(path, os.O_RDWR, 0o644)
			if err != nil {
				return nil, fmt.Errorf("dmri: %w", err)
			}
			if err := f.Truncate(int64(len(head) + good)); err != nil {
				f.Close()
				return nil, fmt.Errorf("dmri: %w", err)
			}
			if _, err := f.Seek(0, io.SeekEnd); err != nil {
				f.Close()
				return nil, fmt.Errorf("dmri: %w", err)
			}
			rf.f = f
			return rf, nil
		case !errors.Is(err, os.ErrNotExist):
			return nil, fmt.Errorf("dmri: %w", err)
		}
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("dmri: %w", err)
	}
	if _, err := f.Write(head); err != nil {
		f.Close()
		return nil, fmt.Errorf("dmri: %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, fmt.Errorf("dmri: %s: %w", path, err)
	}
	rf.f = f
	return rf, nil
}

// decode passes complete, contiguous records of data to c.take and
// returns the number of bytes they span.
func (rf *recordFile) decode(data []byte, c recordCodec) int {
	off := 0
	for len(data)-off >= 16 {
		h := data[off : off+16]
		if binary.LittleEndian.Uint32(h) != recordMagic {
			break
		}
		start := int(binary.LittleEndian.Uint32(h[4:]))
		n := int(binary.LittleEndian.Uint32(h[8:]))
		plen := int(binary.LittleEndian.Uint32(h[12:]))
		if start != rf.done || n < 1 || plen != c.payload(n) || len(data)-off < 16+plen+4 {
			break
		}
		rec := data[off : off+16+plen]
		if crc32.ChecksumIEEE(rec) != binary.LittleEndian.Uint32(data[off+16+plen:]) {
			break
		}
		c.take(start, n, rec[16:])
		rf.done += n
		off += 16 + plen + 4
	}
	return off
}

// append writes the record of voxels [start, start+n) and syncs the file.
func (rf *recordFile) append(start, n int, payload []byte) error {
	if start != rf.done {
		return fmt.Errorf("dmri: batch starts at voxel %d, the state ends at %d", start, rf.done)
	}
	rec := make([]byte, 16, 16+len(payload)+4)
	binary.LittleEndian.PutUint32(rec, recordMagic)
	binary.LittleEndian.PutUint32(rec[4:], uint32(start))
	binary.LittleEndian.PutUint32(rec[8:], uint32(n))
	binary.LittleEndian.PutUint32(rec[12:], uint32(len(payload)))
	rec = append(rec, payload...)
	rec = binary.LittleEndian.AppendUint32(rec, crc32.ChecksumIEEE(rec))
	if _, err := rf.f.Write(rec); err != nil {
		return fmt.Errorf("dmri: %s: %w", rf.path, err)
	}
	if err := rf.f.Sync(); err != nil {
		return fmt.Errorf("dmri: %s: %w", rf.path, err)
	}
	rf.done += n
	return nil
}

// Done is the number of voxels, from the first, in complete records.
func (rf *recordFile) Done() int { return rf.done }

// Close closes the file.
func (rf *recordFile) Close() error { return rf.f.Close() }

// Remove closes and deletes the file (after the outputs are written).
func (rf *recordFile) Remove() error {
	rf.f.Close()
	if err := os.Remove(rf.path); err != nil {
		return fmt.Errorf("dmri: %w", err)
	}
	return nil
}

// FitState is an open state file of a ball-and-sticks fit.
type FitState struct {
	*recordFile
	// Batches are the complete batches found when the file was opened,
	// in order (batches always start where the previous one ended).
	Batches []*Result
}

// OpenFitState opens (or creates) the state file at path for a run
// identified by key (compared byte for byte). An existing file with
// another key is an error unless fresh is set, in which case it is
// replaced, as it is when fresh is set and the key matches. The
// complete records are decoded into Batches; a torn last record is cut
// off.
func OpenFitState(path string, key []byte, shape ResultShape, fresh bool) (*FitState, error) {
	st := &FitState{}
	rf, err := openRecordFile(path, stateMagicLine, key, st.codec(shape), fresh)
	if err != nil {
		return nil, err
	}
	st.recordFile = rf
	return st, nil
}

// codec decodes records into st.Batches.
func (st *FitState) codec(sh ResultShape) recordCodec {
	return recordCodec{payload: sh.payload, take: func(start, n int, p []byte) {
		b := newBatch(start, n, sh.Samples, sh.Models, sh.Sticks)
		b.unmarshal(p)
		st.Batches = append(st.Batches, b)
	}}
}

// ResultShape gives the per-voxel sizes of a batch record.
type ResultShape struct{ Samples, Models, Sticks int }

func (sh ResultShape) payload(n int) int {
	// ModelProb, ModelMass, F/θ/φ per stick, D, DStd, ESS, PPRMSE and the
	// four correction diagnostics as float32, Active as bytes.
	floats := n*sh.Models + n + 3*sh.Sticks*n*sh.Samples + 2*n*sh.Samples + 6*n
	return 4*floats + sh.Sticks*n*sh.Samples
}

// Append writes b as a record and syncs the file.
func (st *FitState) Append(b *Result) error {
	return st.append(b.Start, b.N, b.marshal())
}

func (b *Result) arrays() [][]float32 {
	a := [][]float32{b.ModelProb, b.ModelMass}
	for i := range b.Sticks {
		a = append(a, b.F[i], b.Theta[i], b.Phi[i])
	}
	return append(a, b.D, b.DStd, b.ESS, b.PPRMSE, b.CorrESS, b.CorrSteps, b.CorrLogZSE, b.CorrFailed)
}

func (b *Result) marshal() []byte {
	var w bytes.Buffer
	bw := bufio.NewWriter(&w)
	var buf [4]byte
	for _, arr := range b.arrays() {
		for _, v := range arr {
			binary.LittleEndian.PutUint32(buf[:], math.Float32bits(v))
			bw.Write(buf[:])
		}
	}
	for i := range b.Sticks {
		for _, on := range b.Active[i] {
			if on {
				bw.WriteByte(1)
			} else {
				bw.WriteByte(0)
			}
		}
	}
	bw.Flush()
	return w.Bytes()
}

func (b *Result) unmarshal(p []byte) {
	off := 0
	for _, arr := range b.arrays() {
		for k := range arr {
			arr[k] = math.Float32frombits(binary.LittleEndian.Uint32(p[off:]))
			off += 4
		}
	}
	for i := range b.Sticks {
		for k := range b.Active[i] {
			b.Active[i][k] = p[off] != 0
			off++
		}
	}
}
