// Package view is the local web app of `prism view`: a net/http server,
// with its page, script and style embedded (go:embed, nothing fetched at
// run time), that explores a trained PRISM posterior interactively.
//
//   - Grid families (symbolic regression, lingauss, …): a λ slider updates
//     the model posterior q(M | x, λ) (exact over a candidate list, the
//     numbers of `prism select --candidates`), the component inclusion
//     probabilities and the model-averaged (global) or one-model (local)
//     posterior predictive band; a model's parameter marginals are drawn
//     on demand (Grid).
//   - Diffusion MRI: orthogonal slices of FA, direction-encoded colour,
//     nfibres_prob, model_prob and component maps; the λ slider refits the
//     model posterior of the shown slice, and a click on a voxel shows its
//     model posterior and fibre-direction samples (DMRI).
//
// The server listens on 127.0.0.1 unless told otherwise, serves only its
// embedded assets and computed answers (it reads no file on request), and
// limits request bodies (uploaded observations) to Config.MaxUpload bytes.
package view
