// Package dmri provides the diffusion-MRI model families of prism: the
// multi-shell Ball-and-three-Sticks family "b3s", the
// Ball–Stick–Zeppelin–Tensor family "bszt" and its extension "bszt-conv"
// with Dot, Watson/Bingham-dispersed sticks and zeppelins, NODDI and SANDI
// of the PRISM paper (§4.2, App. C.2), built from multi-compartment signal
// models
//
//	S(b, g)/S0 = Σ_k f_k S_k(b, g),
//
// with fractions f on the simplex of the active compartments, and Gaussian
// or Rician magnitude noise.
//
// The package also provides the acquisition protocols used for training
// (UKB-like n=105 and HCP-like n=297 typical tables, random protocols and
// their mixtures, see Designs) and a reader for FSL bval/bvec gradient
// tables (ReadFSL), Watson and Bingham normalisers and ODFs, the exact
// spherical convolution of stick/zeppelin kernels with them (convolved.go),
// and the ODF conversion of posterior samples (Model.ODF, Model.ODFSH,
// Model.PosteriorODF). Units: b in s/mm², diffusivities in mm²/s.
//
// Families register themselves with family.Register on import; New builds
// further families from a Spec. docs/families/dmri.md documents the
// parameterisation, the parameter names used in JSON and every choice where
// the paper and the reference code differ.
package dmri
