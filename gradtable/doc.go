// Package gradtable reads diffusion MRI acquisition tables (FSL's bval and
// bvec files, either orientation) into family.Design values of rows
// (b [s/mm²], gx, gy, gz), and checks that a table can inform a diffusion
// model at all (enough diffusion-weighted directions, plausible b-value
// units) and that normalised signals are plausible. The dMRI families and
// the voxel pipeline both use it; it knows nothing about either.
package gradtable
