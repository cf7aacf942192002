package dmri

// tensorScale and tensorFloor define D = tensorScale·L·Lᵀ + tensorFloor·I
// (the Tensor compartment of the paper's table of dMRI compartments,
// tab:dmri_models_priors_params), in mm²/s.
const (
	tensorScale = 1e-3
	tensorFloor = 1e-4
)

// tril are the (row, column) positions of the six Cholesky latents.
var tril = [6][2]int{{0, 0}, {1, 0}, {1, 1}, {2, 0}, {2, 1}, {2, 2}}

// choleskyTensor maps six latents, used directly as the lower-triangular
// entries of L in row-major order (0,0),(1,0),(1,1),(2,0),(2,1),(2,2), to
// the diffusion tensor D = 10⁻³·L·Lᵀ + 10⁻⁴·I, which is symmetric positive
// definite for every z.
func choleskyTensor(z []float64) (D [3][3]float64) {
	var L [3][3]float64
	for i, p := range tril {
		L[p[0]][p[1]] = z[i]
	}
	for i := 0; i < 3; i++ {
		for j := 0; j <= i; j++ {
			s := 0.0
			for k := 0; k <= j; k++ {
				s += L[i][k] * L[j][k]
			}
			D[i][j] = tensorScale * s
			D[j][i] = D[i][j]
		}
		D[i][i] += tensorFloor
	}
	return D
}

// choleskyTensorVJP accumulates gz += ∂/∂z Σ_ij gD_ij D_ij(z).
func choleskyTensorVJP(z []float64, gD [3][3]float64, gz []float64) {
	var L [3][3]float64
	for i, p := range tril {
		L[p[0]][p[1]] = z[i]
	}
	// ∂/∂L Σ gD ⊙ (c L Lᵀ) = c (gD + gDᵀ) L.
	for i, p := range tril {
		r, c := p[0], p[1]
		s := 0.0
		for k := 0; k < 3; k++ {
			s += (gD[r][k] + gD[k][r]) * L[k][c]
		}
		gz[i] += tensorScale * s
	}
}
