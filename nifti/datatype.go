package nifti

import "fmt"

// Datatype is a NIfTI datatype code (the header's datatype field).
type Datatype int16

// The datatypes this package reads and writes. Codes are those of nifti1.h.
const (
	Uint8   Datatype = 2
	Int16   Datatype = 4
	Int32   Datatype = 8
	Float32 Datatype = 16
	Float64 Datatype = 64
	Int8    Datatype = 256
	Uint16  Datatype = 512
	Uint32  Datatype = 768
	Int64   Datatype = 1024
	Uint64  Datatype = 1280
)

// Datatypes defined by the standard that this package recognises by name
// but does not read or write (complex, RGB and 128-bit types).
const (
	dtBinary     Datatype = 1
	dtComplex64  Datatype = 32
	dtRgb24      Datatype = 128
	dtFloat128   Datatype = 1536
	dtComplex128 Datatype = 1792
	dtComplex256 Datatype = 2048
	dtRgba32     Datatype = 2304
)

// Size returns the number of bytes per voxel of a supported datatype and 0
// for any other code.
func (d Datatype) Size() int {
	switch d {
	case Uint8, Int8:
		return 1
	case Int16, Uint16:
		return 2
	case Int32, Uint32, Float32:
		return 4
	case Int64, Uint64, Float64:
		return 8
	}
	return 0
}

// Supported reports whether d can be read and written by this package.
func (d Datatype) Supported() bool { return d.Size() != 0 }

// IsInteger reports whether d is one of the supported integer datatypes.
func (d Datatype) IsInteger() bool { return d.Supported() && d != Float32 && d != Float64 }

// bitpix returns the bits per voxel the standard prescribes for d (also for
// the recognised but unsupported types), or 0 for an unknown code.
func (d Datatype) bitpix() int {
	switch d {
	case dtBinary:
		return 1
	case dtRgb24:
		return 24
	case dtComplex64:
		return 64
	case dtFloat128, dtComplex128:
		return 128
	case dtComplex256:
		return 256
	case dtRgba32:
		return 32
	}
	return 8 * d.Size()
}

// String returns the nifti1.h name of the datatype, e.g. "INT16".
func (d Datatype) String() string {
	switch d {
	case Uint8:
		return "UINT8"
	case Int16:
		return "INT16"
	case Int32:
		return "INT32"
	case Float32:
		return "FLOAT32"
	case Float64:
		return "FLOAT64"
	case Int8:
		return "INT8"
	case Uint16:
		return "UINT16"
	case Uint32:
		return "UINT32"
	case Int64:
		return "INT64"
	case Uint64:
		return "UINT64"
	case dtBinary:
		return "BINARY"
	case dtComplex64:
		return "COMPLEX64"
	case dtRgb24:
		return "RGB24"
	case dtFloat128:
		return "FLOAT128"
	case dtComplex128:
		return "COMPLEX128"
	case dtComplex256:
		return "COMPLEX256"
	case dtRgba32:
		return "RGBA32"
	}
	return fmt.Sprintf("Datatype(%d)", int16(d))
}

// limits returns the representable range of an integer datatype.
func (d Datatype) limits() (lo, hi float64) {
	switch d {
	case Uint8:
		return 0, 255
	case Int8:
		return -128, 127
	case Int16:
		return -32768, 32767
	case Uint16:
		return 0, 65535
	case Int32:
		return -2147483648, 2147483647
	case Uint32:
		return 0, 4294967295
	case Int64:
		// Largest float64 values that convert to int64 without overflow.
		return -9223372036854775808, 9223372036854774784
	case Uint64:
		return 0, 18446744073709549568
	}
	return -1e308, 1e308
}
