// Package nifti reads and writes NIfTI-1 and NIfTI-2 images, the file
// format of FSL, MRtrix3, dipy and most neuroimaging tools.
//
// Read accepts single-file images (.nii, or .nii.gz compressed with gzip,
// detected from the content) in either byte order, of 1 to 7 dimensions
// and the integer and floating-point datatypes (uint8, int8, int16,
// uint16, int32, uint32, int64, uint64, float32, float64). Voxel values
// are returned as float32 in NIfTI order (x fastest) with scl_slope and
// scl_inter applied. Write stores an image little-endian and atomically,
// with parallel gzip compression for names ending in ".gz"; NewLike makes
// a derived map that keeps an input's voxel grid, qform and sform.
//
// Header exposes the voxel-to-world transforms (QformMatrix, SformMatrix,
// VoxelToWorld) and FSL's left-right convention (FSLFlipX), which decides
// whether the x component of FSL b-vectors and dyads is negated relative
// to the image's voxel axes. docs/nifti.md describes the conventions and
// the error behaviour.
package nifti
