// Package dmri provides the diffusion-MRI model families of prism: the
// multi-shell Ball-and-three-Sticks family "b3s" and the
// Ball–Stick–Zeppelin–Tensor family "bszt" of the PRISM paper (§4.2,
// App. C.2), built from multi-compartment signal models
//
//	S(b, g)/S0 = Σ_k f_k S_k(b, g),
//
// with fractions f on the simplex of the active compartments, and Gaussian
// or Rician magnitude noise.
//
// The package also provides the acquisition protocols used for training
// (UKB-like n=105 and HCP-like n=297 typical tables, random protocols and
// their mixtures, see Designs) and a reader for FSL bval/bvec gradient
// tables (ReadFSL). Units: b in s/mm², diffusivities in mm²/s.
//
// Families register themselves with family.Register on import; New builds
// further families from a Spec. docs/families/dmri.md documents the
// parameterisation, the parameter names used in JSON and every choice where
// the paper and the reference code differ.
package dmri
