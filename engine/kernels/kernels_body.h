// The C kernels of package kernels. This file is compiled once per kernel
// path by kernels_generic.c, kernels_avx2.c and kernels_avx512.c, each of
// which sets the instruction set with "#pragma GCC target" and a suffix for
// the exported names (kernels_rename.h); cgo's flags (impl_cgo.go) are
// -O3 -fopenmp-simd without -march, so the binary runs on any x86-64 CPU
// and kernels_dispatch.c chooses the copy at run time. Code for one
// instruction set sits under its feature macro (__AVX512F__, __AVX2__),
// which the target pragma defines.
//
// The float semantics stay IEEE (no -ffast-math, so NaN and Inf propagate
// as in the Go reference) except that subnormals are flushed to zero
// inside the kernels (PK_FTZ below); the loops that need reassociation to
// vectorise (sums, maxima) say so explicitly with "#pragma omp simd
// reduction", which -fopenmp-simd honours without linking an OpenMP
// runtime. exp is a branch-free polynomial (below) that gcc vectorises,
// rather than libm's scalar expf.
//
// Each function works on a range [lo, hi) so that the Go side can split the
// work over goroutines with one cgo call (≈100 ns) per goroutine.
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "kernels.h"
#if defined(__x86_64__)
#include <immintrin.h>
#endif

// PK_FTZ, first statement of every exported kernel, turns on flush-to-zero
// and denormals-are-zero (MXCSR bits 15 and 6) for the kernel's duration
// and restores the caller's MXCSR on return (cgo runs the kernel on a Go
// thread, whose Go code keeps full IEEE semantics). Training drives some
// values into the float32 subnormal range (below 1.2e-38: GELU′ of large
// negative pre-activations, the gradients that flow through it), and every
// arithmetic operation on a subnormal takes a microcode assist of ~100
// cycles on x86: a lingauss-k6 run slowed from 10,500 to 7,700 samples/s
// over 20 minutes, with the GELU backward's products 3× slower
// (docs/benchmarks.md). Flushing changes results only where a value or a
// product is below 1.2e-38 in magnitude; NaN and Inf propagate unchanged.
#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
static inline unsigned pk_ftz_enter(void) {
	unsigned csr = _mm_getcsr();
	_mm_setcsr(csr | 0x8040u);
	return csr;
}
static inline void pk_ftz_leave(unsigned *csr) { _mm_setcsr(*csr); }
#define PK_FTZ unsigned pk_csr_ __attribute__((cleanup(pk_ftz_leave), unused)) = pk_ftz_enter()
#else
#define PK_FTZ (void)0
#endif

#define PK_INLINE static inline __attribute__((always_inline))

// pk_exp: e^x for float32 with about 2 ulp error: x = n·ln2 + r with
// |r| ≤ ln2/2, e^r from the Cephes expf minimax polynomial, 2^n built in the
// exponent bits. Underflow (x < −87.3, including −Inf) gives exactly 0,
// overflow (x > 88.3) gives +Inf, NaN propagates.
PK_INLINE float pk_exp(float x) {
	float xc = x > 88.3f ? 88.3f : x;
	xc = xc < -87.3f ? -87.3f : xc;
	float n = __builtin_rintf(xc * 1.44269504088896341f);
	float r = xc - n * 0.693359375f;
	r = r + n * 2.12194440e-4f;
	float z = r * r;
	float p = 1.9875691500e-4f;
	p = p * r + 1.3981999507e-3f;
	p = p * r + 8.3334519073e-3f;
	p = p * r + 4.1665795894e-2f;
	p = p * r + 1.6666665459e-1f;
	p = p * r + 5.0000001201e-1f;
	p = p * z + r + 1.0f;
	union { int i; float f; } u;
	u.i = ((int)n + 127) << 23;
	float e = p * u.f;
	e = x > 88.3f ? INFINITY : e;
	return x < -87.3f ? 0.0f : e;
}

#ifdef __AVX512F__
// pk_exp16 is pk_exp on 16 lanes.
PK_INLINE __m512 pk_exp16(__m512 x) {
	// max/min return their second operand when one is NaN: NaN propagates.
	__m512 xc = _mm512_max_ps(_mm512_set1_ps(-87.3f), x);
	xc = _mm512_min_ps(_mm512_set1_ps(88.3f), xc);
	__m512 n = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(1.44269504088896341f)),
		_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	__m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), xc);
	r = _mm512_fmadd_ps(n, _mm512_set1_ps(2.12194440e-4f), r);
	__m512 z = _mm512_mul_ps(r, r);
	__m512 p = _mm512_set1_ps(1.9875691500e-4f);
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
	p = _mm512_add_ps(_mm512_fmadd_ps(p, z, r), _mm512_set1_ps(1.0f));
	__m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
	__m512 y = _mm512_mul_ps(p, _mm512_castsi512_ps(e));
	y = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_set1_ps(88.3f), _CMP_GT_OQ), y,
		_mm512_set1_ps(INFINITY));
	return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.3f), _CMP_LT_OQ), y,
		_mm512_setzero_ps());
}

// pk_transpose16x16 transposes the 16×16 block r[0..15] (row i = 16 floats)
// in registers: afterwards r[j] holds column j. Two unpack stages
// interleave 2×2 and 4×4 blocks inside each 128-bit lane, two 128-bit lane
// shuffles gather the four lanes.
PK_INLINE void pk_transpose16x16(__m512 r[16]) {
	__m512 t[16], u[16];
	for (int i = 0; i < 16; i += 2) {
		t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
		t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
	}
	for (int i = 0; i < 16; i += 4) {
		u[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[i]), _mm512_castps_pd(t[i + 2])));
		u[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[i]), _mm512_castps_pd(t[i + 2])));
		u[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[i + 1]), _mm512_castps_pd(t[i + 3])));
		u[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[i + 1]), _mm512_castps_pd(t[i + 3])));
	}
	// u[4g + j], 128-bit lane L: rows 4g…4g+3 of column 4L + j.
	for (int j = 0; j < 4; j++) {
		const __m512 v0 = _mm512_shuffle_f32x4(u[j], u[4 + j], _MM_SHUFFLE(2, 0, 2, 0));
		const __m512 v1 = _mm512_shuffle_f32x4(u[j], u[4 + j], _MM_SHUFFLE(3, 1, 3, 1));
		const __m512 w0 = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], _MM_SHUFFLE(2, 0, 2, 0));
		const __m512 w1 = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], _MM_SHUFFLE(3, 1, 3, 1));
		r[j] = _mm512_shuffle_f32x4(v0, w0, _MM_SHUFFLE(2, 0, 2, 0));
		r[8 + j] = _mm512_shuffle_f32x4(v0, w0, _MM_SHUFFLE(3, 1, 3, 1));
		r[4 + j] = _mm512_shuffle_f32x4(v1, w1, _MM_SHUFFLE(2, 0, 2, 0));
		r[12 + j] = _mm512_shuffle_f32x4(v1, w1, _MM_SHUFFLE(3, 1, 3, 1));
	}
}
#endif

// ---- bias ---------------------------------------------------------------

void pk_add_bias(float *y, long lo, long hi, long n, const float *bias) {
	PK_FTZ;
	for (long r = lo; r < hi; r++) {
		float *yr = y + r * n;
		for (long j = 0; j < n; j++) yr[j] += bias[j];
	}
}

void pk_bias_grad(const float *dy, long lo, long hi, long n, float *dbias) {
	PK_FTZ;
	for (long r = lo; r < hi; r++) {
		const float *g = dy + r * n;
		for (long j = 0; j < n; j++) dbias[j] += g[j];
	}
}

// ---- layer norm -----------------------------------------------------------

// pk_row_stats returns the mean and 1/sqrt(var + eps) of a row.
PK_INLINE void pk_row_stats(const float *x, long dim, float eps, float *mean, float *rstd) {
	float s = 0;
#pragma omp simd reduction(+ : s)
	for (long j = 0; j < dim; j++) s += x[j];
	float m = s / (float)dim;
	float v = 0;
#pragma omp simd reduction(+ : v)
	for (long j = 0; j < dim; j++) {
		float d = x[j] - m;
		v += d * d;
	}
	*mean = m;
	*rstd = 1.0f / sqrtf(v / (float)dim + eps);
}

void pk_ln_fwd(const float *x, long lo, long hi, long dim, const float *gamma, const float *beta,
	float eps, float *y, float *mean, float *rstd) {
	PK_FTZ;
	for (long r = lo; r < hi; r++) {
		const float *xr = x + r * dim;
		float *yr = y + r * dim;
		float m, rs;
		pk_row_stats(xr, dim, eps, &m, &rs);
		if (gamma && beta) {
			for (long j = 0; j < dim; j++) yr[j] = (xr[j] - m) * rs * gamma[j] + beta[j];
		} else if (gamma) {
			for (long j = 0; j < dim; j++) yr[j] = (xr[j] - m) * rs * gamma[j];
		} else if (beta) {
			for (long j = 0; j < dim; j++) yr[j] = (xr[j] - m) * rs + beta[j];
		} else {
			for (long j = 0; j < dim; j++) yr[j] = (xr[j] - m) * rs;
		}
		if (mean) mean[r] = m;
		if (rstd) rstd[r] = rs;
	}
}

// pk_ln_bwd_row accumulates the LayerNorm backward of one row given the
// upstream gradient g0 (before the γ scaling).
PK_INLINE void pk_ln_bwd_row(const float *g0, const float *xr, float m, float rs, const float *gamma,
	long dim, float *dxr, float *dgamma, float *dbeta) {
	float sg = 0, sgx = 0;
	if (gamma) {
#pragma omp simd reduction(+ : sg, sgx)
		for (long j = 0; j < dim; j++) {
			float h = (xr[j] - m) * rs;
			float g = g0[j] * gamma[j];
			sg += g;
			sgx += g * h;
		}
	} else {
#pragma omp simd reduction(+ : sg, sgx)
		for (long j = 0; j < dim; j++) {
			float h = (xr[j] - m) * rs;
			sg += g0[j];
			sgx += g0[j] * h;
		}
	}
	if (dgamma)
		for (long j = 0; j < dim; j++) dgamma[j] += g0[j] * (xr[j] - m) * rs;
	if (dbeta)
		for (long j = 0; j < dim; j++) dbeta[j] += g0[j];
	if (!dxr) return;
	sg /= (float)dim;
	sgx /= (float)dim;
	if (gamma) {
		for (long j = 0; j < dim; j++) {
			float h = (xr[j] - m) * rs;
			dxr[j] += rs * (g0[j] * gamma[j] - sg - h * sgx);
		}
	} else {
		for (long j = 0; j < dim; j++) {
			float h = (xr[j] - m) * rs;
			dxr[j] += rs * (g0[j] - sg - h * sgx);
		}
	}
}

void pk_ln_bwd(const float *dy, const float *x, const float *mean, const float *rstd, const float *gamma,
	long lo, long hi, long dim, float *dx, float *dgamma, float *dbeta) {
	PK_FTZ;
	for (long r = lo; r < hi; r++)
		pk_ln_bwd_row(dy + r * dim, x + r * dim, mean[r], rstd[r], gamma, dim, dx ? dx + r * dim : NULL,
			dgamma, dbeta);
}

// ---- AdaLN modulation -----------------------------------------------------

void pk_mod_fwd(const float *h, const float *s, const float *c, long lo, long hi, long t, long d, float *y) {
	PK_FTZ;
	for (long b = lo; b < hi; b++) {
		const float *sb = s + b * d, *cb = c + b * d;
		for (long i = b * t; i < (b + 1) * t; i++) {
			const float *hr = h + i * d;
			float *yr = y + i * d;
			for (long j = 0; j < d; j++) yr[j] = hr[j] * (1.0f + sb[j]) + cb[j];
		}
	}
}

void pk_mod_bwd(const float *dy, const float *h, const float *s, long lo, long hi, long t, long d,
	float *dh, float *ds, float *dc) {
	PK_FTZ;
	for (long b = lo; b < hi; b++) {
		const float *sb = s + b * d;
		for (long i = b * t; i < (b + 1) * t; i++) {
			const float *g = dy + i * d, *hr = h + i * d;
			if (dh)
				for (long j = 0; j < d; j++) dh[i * d + j] += g[j] * (1.0f + sb[j]);
			if (ds)
				for (long j = 0; j < d; j++) ds[b * d + j] += g[j] * hr[j];
			if (dc)
				for (long j = 0; j < d; j++) dc[b * d + j] += g[j];
		}
	}
}

void pk_lnmod_fwd(const float *x, long lo, long hi, long t, long d, const float *gamma, const float *beta,
	const float *s, const float *c, float eps, float *y, float *mean, float *rstd) {
	PK_FTZ;
	float stack[1024];
	// effective scale and shift per batch
	float *sc = 2 * d <= 1024 ? stack : malloc(2 * d * sizeof(float));
	if (!sc) abort();
	float *sh = sc + d;
	for (long b = lo; b < hi; b++) {
		const float *sb = s + b * d, *cb = c + b * d;
		// y = (x̂·γ + β)·(1+s) + c = x̂·(γ(1+s)) + (β(1+s) + c)
		for (long j = 0; j < d; j++) {
			float g = gamma ? gamma[j] : 1.0f, be = beta ? beta[j] : 0.0f;
			sc[j] = g * (1.0f + sb[j]);
			sh[j] = be * (1.0f + sb[j]) + cb[j];
		}
		for (long i = b * t; i < (b + 1) * t; i++) {
			const float *xr = x + i * d;
			float *yr = y + i * d;
			float m, rs;
			pk_row_stats(xr, d, eps, &m, &rs);
			for (long j = 0; j < d; j++) yr[j] = (xr[j] - m) * rs * sc[j] + sh[j];
			if (mean) mean[i] = m;
			if (rstd) rstd[i] = rs;
		}
	}
	if (sc != stack) free(sc);
}

void pk_lnmod_bwd(const float *dy, const float *x, const float *mean, const float *rstd, const float *gamma,
	const float *beta, const float *s, long lo, long hi, long t, long d,
	float *dx, float *dgamma, float *dbeta, float *ds, float *dc) {
	PK_FTZ;
	float stack[1024];
	float *dln = d <= 1024 ? stack : malloc(d * sizeof(float));
	if (!dln) abort();
	for (long b = lo; b < hi; b++) {
		const float *sb = s + b * d;
		for (long i = b * t; i < (b + 1) * t; i++) {
			const float *g = dy + i * d, *xr = x + i * d;
			float m = mean[i], rs = rstd[i];
			if (ds) {
				for (long j = 0; j < d; j++) {
					float ln = (xr[j] - m) * rs * (gamma ? gamma[j] : 1.0f) + (beta ? beta[j] : 0.0f);
					ds[b * d + j] += g[j] * ln;
				}
			}
			if (dc)
				for (long j = 0; j < d; j++) dc[b * d + j] += g[j];
			for (long j = 0; j < d; j++) dln[j] = g[j] * (1.0f + sb[j]);
			pk_ln_bwd_row(dln, xr, m, rs, gamma, d, dx ? dx + i * d : NULL, dgamma, dbeta);
		}
	}
	if (dln != stack) free(dln);
}

// ---- GELU (tanh approximation) ---------------------------------------------

// 0.5·(1 + tanh(u)) = σ(2u), so GELU(x) = x·σ(2u) with u = √(2/π)(x + 0.044715x³),
// and GELU'(x) = σ(2u) + 2x·σ(2u)(1 − σ(2u))·du/dx.
#define PK_GELU_C0 0.7978845608028654f
#define PK_GELU_C1 0.044715f

PK_INLINE float pk_gelu(float x) {
	float u = PK_GELU_C0 * (x + PK_GELU_C1 * x * x * x);
	return x / (1.0f + pk_exp(-2.0f * u));
}

PK_INLINE float pk_gelu_grad(float x) {
	float x2 = x * x;
	float u = PK_GELU_C0 * (x + PK_GELU_C1 * x2 * x);
	float sg = 1.0f / (1.0f + pk_exp(-2.0f * u));
	float du = PK_GELU_C0 * (1.0f + 3.0f * PK_GELU_C1 * x2);
	return sg + 2.0f * x * sg * (1.0f - sg) * du;
}

// ---- portable vectors (the paths without AVX-512) ---------------------------
//
// gcc vector types of the path's native width: 8 lanes (one ymm register)
// with AVX2, 4 (one xmm) otherwise. The vector exp and GELU below compute
// what pk_exp and pk_gelu do lane by lane (rint as the add-and-subtract of
// 1.5·2^23, exact in round-to-nearest for |x| < 2^22; selects as bit masks
// from comparisons, so NaN takes the same branches as in the scalar code).
#if defined(__AVX2__)
#define PK_VW 8
#else
#define PK_VW 4
#endif
typedef float pk_vf __attribute__((vector_size(4 * PK_VW), aligned(4)));
typedef int pk_vi __attribute__((vector_size(4 * PK_VW)));
#define PK_VLD(p) (*(const pk_vf *)(p))
#define PK_VST(p, v) (*(pk_vf *)(p) = (v))

// pk_vsel returns a where the mask m (all ones or all zeros per lane) is set,
// else b.
PK_INLINE pk_vf pk_vsel(pk_vi m, pk_vf a, pk_vf b) { return (pk_vf)((m & (pk_vi)a) | (~m & (pk_vi)b)); }

PK_INLINE pk_vf pk_vdup(float x) { return (pk_vf){0} + x; }

PK_INLINE pk_vf pk_exp_v(pk_vf x) {
	pk_vf xc = pk_vsel(x > 88.3f, pk_vdup(88.3f), x);
	xc = pk_vsel(xc < -87.3f, pk_vdup(-87.3f), xc);
	const pk_vf n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
	pk_vf r = xc - n * 0.693359375f;
	r = r + n * 2.12194440e-4f;
	const pk_vf z = r * r;
	pk_vf p = pk_vdup(1.9875691500e-4f);
	p = p * r + 1.3981999507e-3f;
	p = p * r + 8.3334519073e-3f;
	p = p * r + 4.1665795894e-2f;
	p = p * r + 1.6666665459e-1f;
	p = p * r + 5.0000001201e-1f;
	p = p * z + r + 1.0f;
	const pk_vi e = (__builtin_convertvector(n, pk_vi) + 127) << 23;
	pk_vf y = p * (pk_vf)e;
	y = pk_vsel(x > 88.3f, pk_vdup(INFINITY), y);
	return pk_vsel(x < -87.3f, pk_vdup(0.0f), y);
}

// pk_gelu_sig_v is σ(2u) of pk_gelu; 1/(1+e) is 0 where e overflowed.
PK_INLINE pk_vf pk_gelu_sig_v(pk_vf x, pk_vf x2) {
	const pk_vf u = PK_GELU_C0 * (x + PK_GELU_C1 * x2 * x);
	return 1.0f / (1.0f + pk_exp_v(-2.0f * u));
}

PK_INLINE pk_vf pk_gelu_v(pk_vf x) { return x * pk_gelu_sig_v(x, x * x); }

PK_INLINE pk_vf pk_gelu_grad_v(pk_vf x) {
	const pk_vf x2 = x * x;
	const pk_vf sg = pk_gelu_sig_v(x, x2);
	const pk_vf du = PK_GELU_C0 * (1.0f + 3.0f * PK_GELU_C1 * x2);
	return sg + 2.0f * x * sg * (1.0f - sg) * du;
}

#if defined(__AVX2__)
PK_INLINE float pk_hmax8(__m256 v) {
	__m128 x = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	x = _mm_max_ps(x, _mm_movehl_ps(x, x));
	x = _mm_max_ss(x, _mm_movehdup_ps(x));
	return _mm_cvtss_f32(x);
}

PK_INLINE float pk_hsum8(__m256 v) {
	__m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	x = _mm_add_ps(x, _mm_movehl_ps(x, x));
	x = _mm_add_ss(x, _mm_movehdup_ps(x));
	return _mm_cvtss_f32(x);
}

#endif

// pk_key_span returns in [*j0, *j1) the union of the key ranges
// [lo[r], hi[r]) of n query rows (empty rows skipped; an empty union gives
// j0 = tk > j1 = 0, so a loop over it runs no iterations).
PK_INLINE void pk_key_span(const long *lo, const long *hi, long n, long tk, long *j0, long *j1) {
	long a = tk, b = 0;
	for (long r = 0; r < n; r++)
		if (lo[r] < hi[r]) {
			a = lo[r] < a ? lo[r] : a;
			b = hi[r] > b ? hi[r] : b;
		}
	*j0 = a;
	*j1 = b;
}

#ifdef __AVX512F__
// The vector GELU replaces the division in σ by rcp14 and one Newton step
// (relative error ≈ 2^-28): vdivps on 16 lanes has a throughput of one per
// ~10 cycles and perf showed it dominating the gcc-vectorised loop.
PK_INLINE __m512 pk_gelu_sig16(__m512 x, __m512 x2) {
	__m512 u = _mm512_mul_ps(_mm512_set1_ps(PK_GELU_C0),
		_mm512_fmadd_ps(_mm512_mul_ps(_mm512_set1_ps(PK_GELU_C1), x2), x, x));
	__m512 e = pk_exp16(_mm512_mul_ps(_mm512_set1_ps(-2.0f), u));
	__m512 d = _mm512_add_ps(_mm512_set1_ps(1.0f), e);
	__m512 r = _mm512_rcp14_ps(d);
	r = _mm512_mul_ps(r, _mm512_fnmadd_ps(d, r, _mm512_set1_ps(2.0f)));
	// σ = 0 where e overflowed to +Inf (the Newton step would give NaN).
	return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(e, _mm512_set1_ps(INFINITY), _CMP_EQ_OQ), r,
		_mm512_setzero_ps());
}

PK_INLINE __m512 pk_gelu16(__m512 x) { return _mm512_mul_ps(x, pk_gelu_sig16(x, _mm512_mul_ps(x, x))); }

PK_INLINE __m512 pk_gelu_grad16(__m512 x) {
	__m512 x2 = _mm512_mul_ps(x, x);
	__m512 sg = pk_gelu_sig16(x, x2);
	__m512 du = _mm512_mul_ps(_mm512_set1_ps(PK_GELU_C0),
		_mm512_fmadd_ps(_mm512_set1_ps(3.0f * PK_GELU_C1), x2, _mm512_set1_ps(1.0f)));
	__m512 t = _mm512_mul_ps(_mm512_mul_ps(_mm512_add_ps(x, x), sg), _mm512_sub_ps(_mm512_set1_ps(1.0f), sg));
	return _mm512_fmadd_ps(t, du, sg);
}

PK_INLINE __mmask16 pk_tail(long left) { return left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1); }
#endif

void pk_gelu_fwd(const float *x, float *y, long n) {
	PK_FTZ;
#ifdef __AVX512F__
	for (long i = 0; i < n; i += 16) {
		const __mmask16 m = pk_tail(n - i);
		_mm512_mask_storeu_ps(y + i, m, pk_gelu16(_mm512_maskz_loadu_ps(m, x + i)));
	}
#else
	long i = 0;
	for (; i + PK_VW <= n; i += PK_VW) PK_VST(y + i, pk_gelu_v(PK_VLD(x + i)));
	for (; i < n; i++) y[i] = pk_gelu(x[i]);
#endif
}

void pk_gelu_bwd(const float *dy, const float *x, float *dx, long n) {
	PK_FTZ;
#ifdef __AVX512F__
	for (long i = 0; i < n; i += 16) {
		const __mmask16 m = pk_tail(n - i);
		__m512 g = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, dy + i), pk_gelu_grad16(_mm512_maskz_loadu_ps(m, x + i)));
		_mm512_mask_storeu_ps(dx + i, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, dx + i), g));
	}
#else
	long i = 0;
	for (; i + PK_VW <= n; i += PK_VW) PK_VST(dx + i, PK_VLD(dx + i) + PK_VLD(dy + i) * pk_gelu_grad_v(PK_VLD(x + i)));
	for (; i < n; i++) dx[i] += dy[i] * pk_gelu_grad(x[i]);
#endif
}

void pk_bias_gelu_fwd(float *z, long lo, long hi, long n, const float *bias, float *y) {
	PK_FTZ;
	for (long r = lo; r < hi; r++) {
		float *zr = z + r * n, *yr = y + r * n;
		if (bias) {
#ifdef __AVX512F__
			for (long j = 0; j < n; j += 16) {
				const __mmask16 m = pk_tail(n - j);
				__m512 v = _mm512_add_ps(_mm512_maskz_loadu_ps(m, zr + j), _mm512_maskz_loadu_ps(m, bias + j));
				_mm512_mask_storeu_ps(zr + j, m, v);
				_mm512_mask_storeu_ps(yr + j, m, pk_gelu16(v));
			}
#else
			long j = 0;
			for (; j + PK_VW <= n; j += PK_VW) {
				const pk_vf v = PK_VLD(zr + j) + PK_VLD(bias + j);
				PK_VST(zr + j, v);
				PK_VST(yr + j, pk_gelu_v(v));
			}
			for (; j < n; j++) {
				float v = zr[j] + bias[j];
				zr[j] = v;
				yr[j] = pk_gelu(v);
			}
#endif
		} else {
			pk_gelu_fwd(zr, yr, n);
		}
	}
}

void pk_bias_gelu_bwd(const float *dy, const float *z, long lo, long hi, long n, float *dz, float *dbias) {
	PK_FTZ;
	for (long r = lo; r < hi; r++) {
		const float *g = dy + r * n, *zr = z + r * n;
#ifdef __AVX512F__
		for (long j = 0; j < n; j += 16) {
			const __mmask16 m = pk_tail(n - j);
			__m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, g + j), pk_gelu_grad16(_mm512_maskz_loadu_ps(m, zr + j)));
			if (dz) _mm512_mask_storeu_ps(dz + r * n + j, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, dz + r * n + j), v));
			if (dbias) _mm512_mask_storeu_ps(dbias + j, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, dbias + j), v));
		}
#else
		long j = 0;
		for (; j + PK_VW <= n; j += PK_VW) {
			const pk_vf v = PK_VLD(g + j) * pk_gelu_grad_v(PK_VLD(zr + j));
			if (dz) PK_VST(dz + r * n + j, PK_VLD(dz + r * n + j) + v);
			if (dbias) PK_VST(dbias + j, PK_VLD(dbias + j) + v);
		}
		for (; j < n; j++) {
			float v = g[j] * pk_gelu_grad(zr[j]);
			if (dz) dz[r * n + j] += v;
			if (dbias) dbias[j] += v;
		}
#endif
	}
}

// ---- elementwise -------------------------------------------------------------

void pk_axpy(float alpha, const float *x, float *y, long n) {
	PK_FTZ;
	for (long i = 0; i < n; i++) y[i] += alpha * x[i];
}

void pk_add(float *dst, const float *a, const float *b, long n) {
	PK_FTZ;
	for (long i = 0; i < n; i++) dst[i] = a[i] + b[i];
}

void pk_scale(float alpha, float *x, long n) {
	PK_FTZ;
	for (long i = 0; i < n; i++) x[i] *= alpha;
}

// ---- optimiser (engine/optim) -----------------------------------------------------

// pk_radam_rect: the rectified RAdam step with per-unit gradient scale and
// the EMA of the new values, for n elements whose unit index starts at u0
// and cycles through units (see RAdamRect in optim.go). The inner loop runs
// over one row of units at a time, so it vectorises.
void pk_radam_rect(const double *scale, long units, long u0, const float *grad, float *val, float *m, float *v,
	float *ema, long n, float b1, float omb1, float b2, float omb2, float a, float c2, float eps, float dec, float omdec) {
	PK_FTZ;
	long i = 0, u = u0;
	while (i < n) {
		long len = units - u;
		if (len > n - i) len = n - i;
		const float *g = grad + i;
		const double *sc = scale + u;
		float *w = val + i, *mm = m + i, *vv = v + i, *e = ema + i;
#pragma omp simd
		for (long j = 0; j < len; j++) {
			float gj = (float)((double)g[j] * sc[j]);
			float mj = b1 * mm[j] + omb1 * gj;
			float vj = b2 * vv[j] + omb2 * gj * gj;
			mm[j] = mj;
			vv[j] = vj;
			float wj = w[j] - a * mj / (__builtin_sqrtf(vj * c2) + eps);
			w[j] = wj;
			e[j] = dec * e[j] + omdec * wj;
		}
		i += len;
		u = 0;
	}
}

// pk_sum_squares2: gacc[u] += g², wacc[u] += w² in double, u = (u0 + i) mod
// units (the AGC norms of RAdam's unit-wise clipping).
void pk_sum_squares2(const float *g, const float *w, long n, double *gacc, double *wacc, long units, long u0) {
	PK_FTZ;
	long i = 0, u = u0;
	while (i < n) {
		long len = units - u;
		if (len > n - i) len = n - i;
		const float *gg = g + i, *ww = w + i;
		double *ga = gacc + u, *wa = wacc + u;
#pragma omp simd
		for (long j = 0; j < len; j++) {
			ga[j] += (double)gg[j] * (double)gg[j];
			wa[j] += (double)ww[j] * (double)ww[j];
		}
		i += len;
		u = 0;
	}
}

// ---- attention -----------------------------------------------------------------
//
// Per (batch, head) pair the keys (forward) or values (backward) are first
// transposed into a [Dh][ldt] scratch (ldt = Tk rounded up to 16, zero
// padded), so that scores for 16 keys at a time are one AVX-512 register
// accumulating Dh broadcast-FMAs; row-wise softmax loops run over the mask's
// allowed span [jlo, jhi) only (half the work for causal masks); products
// with v / into dq, dk, dv vectorise over Dh (one register for Dh = 16). The
// bodies are inlined with Dh as a compile-time constant for 16, 32 and 64.

#define PK_JB 16

// gcc fully unrolls 16-iteration loops before vectorising and then often
// fails to re-vectorise them (perf showed 16 scalar vfmadd231ss per key), so
// the hot attention loops use explicit 16-wide vectors.
// (GCC lets vector types alias their element type, so no may_alias is
// needed; may_alias kept the accumulator arrays in memory.)
typedef float pk_v16 __attribute__((vector_size(64), aligned(4)));
// Head widths up to 16·PK_MAXV take the vector paths; arrays of pk_v16 have
// this fixed size (not Dh/16: variable-length arrays stay on the stack).
#define PK_MAXV 4
#define PK_VEC(dh) ((dh) % 16 == 0 && (dh) <= 16 * PK_MAXV)
#define PK_LD(p) (*(const pk_v16 *)(p))
#define PK_ST(p, v) (*(pk_v16 *)(p) = (v))

static void *pk_alloc(size_t nfloat) {
	size_t bytes = (nfloat * sizeof(float) + 63) & ~(size_t)63;
	void *p = aligned_alloc(64, bytes ? bytes : 64);
	if (!p) abort();
	return p;
}

// pk_scratch hands out 64-byte aligned pieces of one buffer: a stack buffer
// of PK_STACK floats when the call's scratch fits (always for the
// network's shapes and for decoding), else a single heap block, so a
// kernel call makes at most one allocation and usually none.
#define PK_STACK 8192
// PK_ATT_TILE bounds the inference forward's probability tile (floats).
#define PK_ATT_TILE 4096
typedef struct {
	float *base;
	size_t used, cap;
	void *heap;
} pk_scratch;

static void pk_scratch_init(pk_scratch *s, float *stack, size_t nfloat) {
	s->used = 0;
	s->heap = NULL;
	s->cap = nfloat;
	if (nfloat <= PK_STACK) {
		s->base = stack;
	} else {
		s->heap = pk_alloc(nfloat);
		s->base = s->heap;
	}
}

// pk_take returns n floats; pk_round(n) of them count against the budget.
#define pk_round(n) ((((size_t)(n)) + 15) & ~(size_t)15)
static void *pk_take(pk_scratch *s, size_t n) {
	void *p = s->base + s->used;
	s->used += pk_round(n);
	if (s->used > s->cap) abort();
	return p;
}

PK_INLINE void pk_mask_range(const unsigned char *a, long tk, long *jlo, long *jhi) {
	long lo = 0, hi = tk;
	if (a) {
		while (lo < tk && !a[lo]) lo++;
		while (hi > lo && !a[hi - 1]) hi--;
	}
	*jlo = lo;
	*jhi = hi;
}

// pk_scores writes sc[j] = scale·q·k_j for the blocks of 16 keys covering
// [jlo, jhi), from the transposed keys kt ([dh][ldt]).
PK_INLINE void pk_scores(const float *qi, const float *kt, long ldt, long jlo, long jhi, const long dh,
	float scale, float *sc) {
	// Four blocks of 16 keys at a time keep four independent FMA chains in
	// flight (one chain is bound by the 4-cycle FMA latency).
	long j0 = jlo & ~(long)(PK_JB - 1);
	for (; j0 + 4 * PK_JB <= jhi; j0 += 4 * PK_JB) {
		pk_v16 a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
		for (long d = 0; d < dh; d++) {
			const float qd = qi[d] * scale;
			const float *kd = kt + d * ldt + j0;
			a0 += qd * PK_LD(kd);
			a1 += qd * PK_LD(kd + 16);
			a2 += qd * PK_LD(kd + 32);
			a3 += qd * PK_LD(kd + 48);
		}
		PK_ST(sc + j0, a0);
		PK_ST(sc + j0 + 16, a1);
		PK_ST(sc + j0 + 32, a2);
		PK_ST(sc + j0 + 48, a3);
	}
	for (; j0 < jhi; j0 += PK_JB) {
		pk_v16 a0 = {0}, a1 = {0};
		long d = 0;
		for (; d + 1 < dh; d += 2) {
			a0 += (qi[d] * scale) * PK_LD(kt + d * ldt + j0);
			a1 += (qi[d + 1] * scale) * PK_LD(kt + (d + 1) * ldt + j0);
		}
		if (d < dh) a0 += (qi[d] * scale) * PK_LD(kt + d * ldt + j0);
		PK_ST(sc + j0, a0 + a1);
	}
}

// pk_scores4_16 writes the scores scale·q_r·k_j of four queries (rows of Q,
// stride ldq) with Dh = 16 for the nb blocks of 16 transposed keys kt into
// rows of P (stride ldp): each key vector loaded feeds four queries and two
// blocks are done at once, eight independent FMA chains, where pk_scores
// loads every key block once per query.
PK_INLINE void pk_scores4_16(const float *Q, long ldq, const float *kt, long ldt, long nb, float scale,
	float *P, long ldp) {
	float qs[4][16];
	for (long r = 0; r < 4; r++)
		for (long d = 0; d < 16; d++) qs[r][d] = Q[r * ldq + d] * scale;
	long b = 0;
	for (; b + 2 <= nb; b += 2) {
		pk_v16 a00 = {0}, a01 = {0}, a10 = {0}, a11 = {0}, a20 = {0}, a21 = {0}, a30 = {0}, a31 = {0};
		const float *kb = kt + 16 * b;
		for (long d = 0; d < 16; d++) {
			const pk_v16 k0 = PK_LD(kb + d * ldt), k1 = PK_LD(kb + d * ldt + 16);
			a00 += qs[0][d] * k0;
			a01 += qs[0][d] * k1;
			a10 += qs[1][d] * k0;
			a11 += qs[1][d] * k1;
			a20 += qs[2][d] * k0;
			a21 += qs[2][d] * k1;
			a30 += qs[3][d] * k0;
			a31 += qs[3][d] * k1;
		}
		float *pb = P + 16 * b;
		PK_ST(pb, a00);
		PK_ST(pb + 16, a01);
		PK_ST(pb + ldp, a10);
		PK_ST(pb + ldp + 16, a11);
		PK_ST(pb + 2 * ldp, a20);
		PK_ST(pb + 2 * ldp + 16, a21);
		PK_ST(pb + 3 * ldp, a30);
		PK_ST(pb + 3 * ldp + 16, a31);
	}
	if (b < nb) {
		pk_v16 a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
		const float *kb = kt + 16 * b;
		for (long d = 0; d < 16; d++) {
			const pk_v16 k0 = PK_LD(kb + d * ldt);
			a0 += qs[0][d] * k0;
			a1 += qs[1][d] * k0;
			a2 += qs[2][d] * k0;
			a3 += qs[3][d] * k0;
		}
		float *pb = P + 16 * b;
		PK_ST(pb, a0);
		PK_ST(pb + ldp, a1);
		PK_ST(pb + 2 * ldp, a2);
		PK_ST(pb + 3 * ldp, a3);
	}
}

// pk_scores_direct is pk_scores without the transposed copy, for few queries
// (decoding). With AVX-512 and Dh a multiple of 16 it multiplies q with 16
// key rows and sums the 16 products with a 4-level shuffle network (45
// operations per 16 keys instead of 16 horizontal reductions of ~10 each);
// it writes whole blocks of 16 (zeros outside [jlo, jhi)).
PK_INLINE void pk_scores_direct(const float *qi, const float *K, long ldk, long jlo, long jhi, const long dh,
	float scale, float *sc) {
#ifdef __AVX512F__
	if (PK_VEC(dh)) {
		__m512 qv[PK_MAXV];
		for (long c = 0; c < dh / 16; c++) qv[c] = _mm512_mul_ps(_mm512_set1_ps(scale), _mm512_loadu_ps(qi + 16 * c));
		for (long j0 = jlo & ~(long)15; j0 < jhi; j0 += 16) {
			__m512 m[16];
			for (long u = 0; u < 16; u++) {
				const long j = j0 + u;
				if (j < jlo || j >= jhi) {
					m[u] = _mm512_setzero_ps();
					continue;
				}
				const float *kj = K + j * ldk;
				__m512 x = _mm512_mul_ps(qv[0], _mm512_loadu_ps(kj));
				for (long c = 1; c < dh / 16; c++) x = _mm512_fmadd_ps(qv[c], _mm512_loadu_ps(kj + 16 * c), x);
				m[u] = x;
			}
			// Level 1: pairs → per 128-bit lane (a0+a2, b0+b2, a1+a3, b1+b3).
			__m512 t1[8];
			for (long u = 0; u < 8; u++)
				t1[u] = _mm512_add_ps(_mm512_unpacklo_ps(m[2 * u], m[2 * u + 1]),
					_mm512_unpackhi_ps(m[2 * u], m[2 * u + 1]));
			// Level 2: per 128-bit lane the lane sums of four keys.
			__m512 t2[4];
			for (long u = 0; u < 4; u++) {
				const __m512d x = _mm512_castps_pd(t1[2 * u]), y = _mm512_castps_pd(t1[2 * u + 1]);
				t2[u] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(x, y)),
					_mm512_castpd_ps(_mm512_unpackhi_pd(x, y)));
			}
			// Levels 3 and 4: add the four 128-bit lanes.
			const __m512 t30 = _mm512_add_ps(_mm512_shuffle_f32x4(t2[0], t2[1], 0x88),
				_mm512_shuffle_f32x4(t2[0], t2[1], 0xDD));
			const __m512 t31 = _mm512_add_ps(_mm512_shuffle_f32x4(t2[2], t2[3], 0x88),
				_mm512_shuffle_f32x4(t2[2], t2[3], 0xDD));
			_mm512_storeu_ps(sc + j0, _mm512_add_ps(_mm512_shuffle_f32x4(t30, t31, 0x88),
				_mm512_shuffle_f32x4(t30, t31, 0xDD)));
		}
		return;
	}
#elif defined(__AVX2__)
	// Eight keys at a time: q·k_u for eight keys as eight vectors of
	// partial products, summed by a horizontal-add tree into one vector of
	// eight scores (instead of eight separate horizontal reductions).
	if (dh % 8 == 0 && dh <= 16 * PK_MAXV) {
		__m256 qv[2 * PK_MAXV];
		for (long c = 0; c < dh / 8; c++) qv[c] = _mm256_mul_ps(_mm256_set1_ps(scale), _mm256_loadu_ps(qi + 8 * c));
		long j0 = jlo;
		for (; j0 + 8 <= jhi; j0 += 8) {
			__m256 m[8];
			for (long u = 0; u < 8; u++) {
				const float *kj = K + (j0 + u) * ldk;
				__m256 x = _mm256_mul_ps(qv[0], _mm256_loadu_ps(kj));
				for (long c = 1; c < dh / 8; c++) x = _mm256_fmadd_ps(qv[c], _mm256_loadu_ps(kj + 8 * c), x);
				m[u] = x;
			}
			const __m256 t0 = _mm256_hadd_ps(m[0], m[1]), t1 = _mm256_hadd_ps(m[2], m[3]);
			const __m256 t2 = _mm256_hadd_ps(m[4], m[5]), t3 = _mm256_hadd_ps(m[6], m[7]);
			const __m256 u0 = _mm256_hadd_ps(t0, t1), u1 = _mm256_hadd_ps(t2, t3);
			_mm256_storeu_ps(sc + j0, _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20),
				_mm256_permute2f128_ps(u0, u1, 0x31)));
		}
		for (; j0 < jhi; j0++) {
			const float *kj = K + j0 * ldk;
			__m256 x = _mm256_mul_ps(qv[0], _mm256_loadu_ps(kj));
			for (long c = 1; c < dh / 8; c++) x = _mm256_fmadd_ps(qv[c], _mm256_loadu_ps(kj + 8 * c), x);
			sc[j0] = pk_hsum8(x);
		}
		return;
	}
#endif
	for (long j = jlo; j < jhi; j++) {
		const float *kj = K + j * ldk;
		float s = 0;
#pragma omp simd reduction(+ : s)
		for (long d = 0; d < dh; d++) s += qi[d] * kj[d];
		sc[j] = s * scale;
	}
}

#if defined(__AVX2__)
// pk_transpose8x8 transposes the 8×8 block whose rows are r[0..7].
PK_INLINE void pk_transpose8x8(__m256 r[8]) {
	__m256 t[8], u[8];
	for (int i = 0; i < 8; i += 2) {
		t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
		t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
	}
	for (int i = 0; i < 8; i += 4) {
		u[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
		u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
		u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
		u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
	}
	for (int i = 0; i < 4; i++) {
		r[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
		r[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
	}
}
#endif

// pk_transpose copies the [tk][dh] head slice K (row stride ld) to
// kt[d][j] (row stride ldt); with AVX-512 one masked gather per 16 keys and
// d replaces 16 scalar moves (the scalar transpose was 10 % of the forward).
PK_INLINE void pk_transpose(const float *K, long ld, long tk, const long dh, float *kt, long ldt) {
#ifdef __AVX512F__
	const __m512i lane = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
	const __m512i vld = _mm512_set1_epi32((int)ld);
	for (long j0 = 0; j0 < tk; j0 += 16) {
		__m512i idx = _mm512_mullo_epi32(_mm512_add_epi32(lane, _mm512_set1_epi32((int)j0)), vld);
		__mmask16 m = tk - j0 >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (tk - j0)) - 1);
		for (long d = 0; d < dh; d++)
			_mm512_storeu_ps(kt + d * ldt + j0,
				_mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, idx, K + d, 4));
	}
#elif defined(__AVX2__)
	// Gathers are slow on AMD cores before Zen 4 (microcoded); 8×8 blocks
	// are transposed in registers instead (keys past tk load as zeros, and
	// kt has room for them: ldt is a multiple of 16).
	if (dh % 8 == 0) {
		for (long j0 = 0; j0 < tk; j0 += 8)
			for (long d0 = 0; d0 < dh; d0 += 8) {
				__m256 r[8];
				for (long u = 0; u < 8; u++)
					r[u] = j0 + u < tk ? _mm256_loadu_ps(K + (j0 + u) * ld + d0) : _mm256_setzero_ps();
				pk_transpose8x8(r);
				for (long v = 0; v < 8; v++) _mm256_storeu_ps(kt + (d0 + v) * ldt + j0, r[v]);
			}
		return;
	}
	for (long j = 0; j < tk; j++)
		for (long d = 0; d < dh; d++) kt[d * ldt + j] = K[j * ld + d];
#else
	for (long j = 0; j < tk; j++)
		for (long d = 0; d < dh; d++) kt[d * ldt + j] = K[j * ld + d];
#endif
}


// pk_softmax_row turns the scores sc[jlo, jhi) into unnormalised weights
// e^(s − max) over the allowed keys (a[j] != 0, or all when a is NULL) and
// returns their sum; sc is written over the whole 16-blocks covering the
// range, with zeros at masked and padding positions. At least one key in
// [jlo, jhi) must be allowed. Masked lanes are handled in registers: writing
// −Inf padding with scalar stores and reloading the block as a vector
// stalled on store forwarding (16 % of the forward).
PK_INLINE float pk_softmax_row(float *sc, long jlo, long jhi, const unsigned char *a) {
	const long jb0 = jlo & ~(long)(PK_JB - 1);
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
	const long nb = (jhi - jb0 + 15) / 16;
	__mmask16 valid[nb];
	__m512 m = _mm512_set1_ps(-INFINITY);
	for (long b = 0; b < nb; b++) {
		const long j0 = jb0 + 16 * b;
		__mmask16 v = 0xFFFF;
		if (j0 < jlo) v &= (__mmask16)(0xFFFFu << (jlo - j0));
		if (jhi - j0 < 16) v &= (__mmask16)((1u << (jhi - j0)) - 1);
		if (a) v = _mm_mask_test_epi8_mask(v, _mm_maskz_loadu_epi8(v, a + j0), _mm_set1_epi8(-1));
		valid[b] = v;
		m = _mm512_max_ps(m, _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), v, sc + j0));
	}
	const __m512 mx = _mm512_set1_ps(_mm512_reduce_max_ps(m));
	__m512 sum = _mm512_setzero_ps();
	for (long b = 0; b < nb; b++) {
		const long j0 = jb0 + 16 * b;
		__m512 x = _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), valid[b], sc + j0);
		__m512 e = pk_exp16(_mm512_sub_ps(x, mx));
		_mm512_storeu_ps(sc + j0, e);
		sum = _mm512_add_ps(sum, e);
	}
	return _mm512_reduce_add_ps(sum);
#else
	for (long j = jb0; j < jlo; j++) sc[j] = -INFINITY;
	if (a)
		for (long j = jlo; j < jhi; j++) sc[j] = a[j] ? sc[j] : -INFINITY;
	pk_vf vm = pk_vdup(-INFINITY);
	long j = jlo;
	for (; j + PK_VW <= jhi; j += PK_VW) {
		const pk_vf x = PK_VLD(sc + j);
		vm = pk_vsel(x > vm, x, vm);
	}
	float mx = -INFINITY;
	for (long u = 0; u < PK_VW; u++) mx = vm[u] > mx ? vm[u] : mx;
	for (; j < jhi; j++) mx = sc[j] > mx ? sc[j] : mx;
	pk_vf vs = {0};
	j = jb0;
	for (; j + PK_VW <= jhi; j += PK_VW) {
		const pk_vf e = pk_exp_v(PK_VLD(sc + j) - mx);
		PK_VST(sc + j, e);
		vs += e;
	}
	float sum = 0;
	for (long u = 0; u < PK_VW; u++) sum += vs[u];
	for (; j < jhi; j++) {
		sc[j] = pk_exp(sc[j] - mx);
		sum += sc[j];
	}
	return sum;
#endif
}

#if defined(__AVX512F__)
// pk_softmax4 normalises four unmasked rows of scores (row stride ldp, tk
// keys, blocks of 16 padded to ldp) in place, exactly as pk_softmax_row and
// the division by the sum do row by row, but interleaved: one row's chain of
// dependent maxima, reductions, exponentials and sums left most of the core
// idle; four rows give four independent chains at every step.
PK_INLINE void pk_softmax4(float *P, long ldp, long tk) {
	const long nb = (tk + 15) / 16;
	const __mmask16 last = (__mmask16)(tk % 16 ? (1u << (tk % 16)) - 1 : 0xFFFF);
	const __m512 ninf = _mm512_set1_ps(-INFINITY);
	__m512 m[4] = {ninf, ninf, ninf, ninf}, sum[4], mx[4], inv[4];
	for (long b = 0; b < nb; b++) {
		const __mmask16 v = b == nb - 1 ? last : 0xFFFF;
		for (long r = 0; r < 4; r++) m[r] = _mm512_max_ps(m[r], _mm512_mask_loadu_ps(ninf, v, P + r * ldp + 16 * b));
	}
	for (long r = 0; r < 4; r++) {
		mx[r] = _mm512_set1_ps(_mm512_reduce_max_ps(m[r]));
		sum[r] = _mm512_setzero_ps();
	}
	for (long b = 0; b < nb; b++) {
		const __mmask16 v = b == nb - 1 ? last : 0xFFFF;
		for (long r = 0; r < 4; r++) {
			float *pb = P + r * ldp + 16 * b;
			const __m512 e = pk_exp16(_mm512_sub_ps(_mm512_mask_loadu_ps(ninf, v, pb), mx[r]));
			_mm512_storeu_ps(pb, e);
			sum[r] = _mm512_add_ps(sum[r], e);
		}
	}
	for (long r = 0; r < 4; r++) inv[r] = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(sum[r]));
	for (long b = 0; b < nb; b++)
		for (long r = 0; r < 4; r++) {
			float *pb = P + r * ldp + 16 * b;
			_mm512_storeu_ps(pb, _mm512_mul_ps(_mm512_loadu_ps(pb), inv[r]));
		}
}
#endif

#if defined(__AVX2__) && !defined(__AVX512F__)
// AVX2 versions of the inference forward's hot loops for Dh = 16, written
// with intrinsics: gcc's lowering of the 16-lane vectors above to pairs of
// ymm registers kept the accumulators in memory and built every scalar
// broadcast through the stack (perf: a third of the forward in vmovss
// stores and memory-operand FMAs; the cross-attention benchmark ran at
// 4 GFLOP/s against 96 with AVX-512).

PK_INLINE __m256 pk_exp8(__m256 x) { return (__m256)pk_exp_v((pk_vf)x); }

// pk_scores4_16_avx2 is pk_scores4_16 one block of 16 keys at a time: four
// queries × two ymm halves = eight accumulators, two key loads and four
// broadcasts per d.
PK_INLINE void pk_scores4_16_avx2(const float *Q, long ldq, const float *kt, long ldt, long nb, float scale,
	float *P, long ldp) {
	float qs[4][16] __attribute__((aligned(32)));
	const __m256 vs = _mm256_set1_ps(scale);
	for (long r = 0; r < 4; r++) {
		_mm256_store_ps(qs[r], _mm256_mul_ps(_mm256_loadu_ps(Q + r * ldq), vs));
		_mm256_store_ps(qs[r] + 8, _mm256_mul_ps(_mm256_loadu_ps(Q + r * ldq + 8), vs));
	}
	for (long b = 0; b < nb; b++) {
		__m256 a00 = _mm256_setzero_ps(), a01 = a00, a10 = a00, a11 = a00, a20 = a00, a21 = a00, a30 = a00, a31 = a00;
		const float *kb = kt + 16 * b;
		for (long d = 0; d < 16; d++) {
			const __m256 k0 = _mm256_loadu_ps(kb + d * ldt), k1 = _mm256_loadu_ps(kb + d * ldt + 8);
			__m256 q = _mm256_broadcast_ss(&qs[0][d]);
			a00 = _mm256_fmadd_ps(q, k0, a00);
			a01 = _mm256_fmadd_ps(q, k1, a01);
			q = _mm256_broadcast_ss(&qs[1][d]);
			a10 = _mm256_fmadd_ps(q, k0, a10);
			a11 = _mm256_fmadd_ps(q, k1, a11);
			q = _mm256_broadcast_ss(&qs[2][d]);
			a20 = _mm256_fmadd_ps(q, k0, a20);
			a21 = _mm256_fmadd_ps(q, k1, a21);
			q = _mm256_broadcast_ss(&qs[3][d]);
			a30 = _mm256_fmadd_ps(q, k0, a30);
			a31 = _mm256_fmadd_ps(q, k1, a31);
		}
		float *pb = P + 16 * b;
		_mm256_storeu_ps(pb, a00);
		_mm256_storeu_ps(pb + 8, a01);
		_mm256_storeu_ps(pb + ldp, a10);
		_mm256_storeu_ps(pb + ldp + 8, a11);
		_mm256_storeu_ps(pb + 2 * ldp, a20);
		_mm256_storeu_ps(pb + 2 * ldp + 8, a21);
		_mm256_storeu_ps(pb + 3 * ldp, a30);
		_mm256_storeu_ps(pb + 3 * ldp + 8, a31);
	}
}

// pk_softmax4_avx2 is pk_softmax4 in 8-lane blocks: four unmasked rows of tk
// scores (row stride ldp, padded to 16) normalised in place, interleaved.
PK_INLINE void pk_softmax4_avx2(float *P, long ldp, long tk) {
	const long nb = (tk + 7) / 8;
	const __m256 ninf = _mm256_set1_ps(-INFINITY);
	const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
	const long rem = tk - 8 * (nb - 1);
	const __m256 last = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32((int)rem), lane));
	__m256 m[4] = {ninf, ninf, ninf, ninf}, sum[4], mx[4], inv[4];
	for (long b = 0; b < nb; b++)
		for (long r = 0; r < 4; r++) {
			__m256 x = _mm256_loadu_ps(P + r * ldp + 8 * b);
			if (b == nb - 1) x = _mm256_blendv_ps(ninf, x, last);
			m[r] = _mm256_max_ps(m[r], x);
		}
	for (long r = 0; r < 4; r++) {
		mx[r] = _mm256_set1_ps(pk_hmax8(m[r]));
		sum[r] = _mm256_setzero_ps();
	}
	for (long b = 0; b < nb; b++)
		for (long r = 0; r < 4; r++) {
			float *pb = P + r * ldp + 8 * b;
			__m256 x = _mm256_loadu_ps(pb);
			if (b == nb - 1) x = _mm256_blendv_ps(ninf, x, last);
			const __m256 e = pk_exp8(_mm256_sub_ps(x, mx[r]));
			_mm256_storeu_ps(pb, e);
			sum[r] = _mm256_add_ps(sum[r], e);
		}
	for (long r = 0; r < 4; r++) inv[r] = _mm256_set1_ps(1.0f / pk_hsum8(sum[r]));
	for (long b = 0; b < nb; b++)
		for (long r = 0; r < 4; r++) {
			float *pb = P + r * ldp + 8 * b;
			_mm256_storeu_ps(pb, _mm256_mul_ps(_mm256_loadu_ps(pb), inv[r]));
		}
}

// pk_pv4_16_avx2: out = P·V for four queries with Dh = 16 over keys
// [j0, j1): eight accumulators, two loads of v_j and four broadcasts per
// key; each query sums over j in order.
PK_INLINE void pk_pv4_16_avx2(const float *P, long ldp, const float *V, long ldv, long j0, long j1, float *O,
	long ldo) {
	__m256 a00 = _mm256_setzero_ps(), a01 = a00, a10 = a00, a11 = a00, a20 = a00, a21 = a00, a30 = a00, a31 = a00;
	for (long j = j0; j < j1; j++) {
		const __m256 v0 = _mm256_loadu_ps(V + j * ldv), v1 = _mm256_loadu_ps(V + j * ldv + 8);
		__m256 p = _mm256_broadcast_ss(P + j);
		a00 = _mm256_fmadd_ps(p, v0, a00);
		a01 = _mm256_fmadd_ps(p, v1, a01);
		p = _mm256_broadcast_ss(P + ldp + j);
		a10 = _mm256_fmadd_ps(p, v0, a10);
		a11 = _mm256_fmadd_ps(p, v1, a11);
		p = _mm256_broadcast_ss(P + 2 * ldp + j);
		a20 = _mm256_fmadd_ps(p, v0, a20);
		a21 = _mm256_fmadd_ps(p, v1, a21);
		p = _mm256_broadcast_ss(P + 3 * ldp + j);
		a30 = _mm256_fmadd_ps(p, v0, a30);
		a31 = _mm256_fmadd_ps(p, v1, a31);
	}
	_mm256_storeu_ps(O, a00);
	_mm256_storeu_ps(O + 8, a01);
	_mm256_storeu_ps(O + ldo, a10);
	_mm256_storeu_ps(O + ldo + 8, a11);
	_mm256_storeu_ps(O + 2 * ldo, a20);
	_mm256_storeu_ps(O + 2 * ldo + 8, a21);
	_mm256_storeu_ps(O + 3 * ldo, a30);
	_mm256_storeu_ps(O + 3 * ldo + 8, a31);
}
#endif

#if !defined(__AVX512F__)
// pk_pv_group computes out_i = Σ_j p_ij v_j for the nr ≤ qg queries of a
// group in native-width vectors: NC = dh/PK_VW vectors per row, qg·NC ≤ 8
// accumulators (12 ymm with the v_j loads: no spills, where the 16-lane
// code of the AVX-512 path spilled on AVX2 and built its broadcasts through
// memory). Every query sums over j in order.
PK_INLINE void pk_pv_group(const float *P, long ldp, const float *V, long ldv, long j0, long j1, const long nr,
	const long dh, float *O, long ldo, const int add) {
	enum { NCMAX = 16 * PK_MAXV / PK_VW };
	const long nc = dh / PK_VW;
	pk_vf acc[4][NCMAX];
	for (long r = 0; r < nr; r++)
		for (long c = 0; c < nc; c++) acc[r][c] = (pk_vf){0};
	for (long j = j0; j < j1; j++) {
		const float *vj = V + j * ldv;
		for (long c = 0; c < nc; c++) {
			const pk_vf vv = PK_VLD(vj + PK_VW * c);
			for (long r = 0; r < nr; r++) acc[r][c] += P[r * ldp + j] * vv;
		}
	}
	for (long r = 0; r < nr; r++)
		for (long c = 0; c < nc; c++)
			PK_VST(O + r * ldo + PK_VW * c, add ? PK_VLD(O + r * ldo + PK_VW * c) + acc[r][c] : acc[r][c]);
}

// pk_pv_native is the P·V of the forward for the paths without AVX-512
// (O = P·V), and with add set the backward's dQ += dS·K: groups of qg
// queries (qg·dh/PK_VW ≤ 8 accumulators), their key spans united (p is
// zero outside each row's span).
PK_INLINE void pk_pv_native(const float *P, long ldp, const float *V, long ldv, const long *rlo, const long *rhi,
	long nt, long tk, const long dh, float *O, long ldo, const int add) {
	const long nc = dh / PK_VW;
	const long qg = nc >= 8 ? 1 : nc >= 4 ? 2 : 4;
	long i0 = 0;
	for (; i0 + qg <= nt; i0 += qg) {
		long j0, j1;
		pk_key_span(rlo + i0, rhi + i0, qg, tk, &j0, &j1);
		if (j0 >= j1) {
			if (!add)
				for (long r = 0; r < qg; r++) memset(O + (i0 + r) * ldo, 0, dh * sizeof(float));
			continue;
		}
#if defined(__AVX2__)
		if (dh == 16 && !add) {
			pk_pv4_16_avx2(P + i0 * ldp, ldp, V, ldv, j0, j1, O + i0 * ldo, ldo);
			continue;
		}
#endif
		switch (qg) {
		case 4: pk_pv_group(P + i0 * ldp, ldp, V, ldv, j0, j1, 4, dh, O + i0 * ldo, ldo, add); break;
		case 2: pk_pv_group(P + i0 * ldp, ldp, V, ldv, j0, j1, 2, dh, O + i0 * ldo, ldo, add); break;
		default: pk_pv_group(P + i0 * ldp, ldp, V, ldv, j0, j1, 1, dh, O + i0 * ldo, ldo, add);
		}
	}
	for (; i0 < nt; i0++) {
		if (rlo[i0] >= rhi[i0]) {
			if (!add) memset(O + i0 * ldo, 0, dh * sizeof(float));
			continue;
		}
		pk_pv_group(P + i0 * ldp, ldp, V, ldv, rlo[i0], rhi[i0], 1, dh, O + i0 * ldo, ldo, add);
	}
}

// pk_scores_native is pk_scores for the paths without AVX-512: sc[j] =
// scale·q·k_j over the blocks of 16 keys covering [jlo, jhi), from the
// transposed keys kt ([dh][ldt]), two blocks (2·16/PK_VW native vectors) at
// a time. Each score sums over d in order from the scaled query, as
// pk_scores does.
PK_INLINE void pk_scores_native(const float *qi, const float *kt, long ldt, long jlo, long jhi, const long dh,
	float scale, float *sc) {
	enum { NB = PK_JB / PK_VW };
	long j0 = jlo & ~(long)(PK_JB - 1);
	for (; j0 + 2 * PK_JB <= jhi || (j0 + PK_JB < jhi && j0 + 2 * PK_JB <= ldt); j0 += 2 * PK_JB) {
		pk_vf a[2 * NB];
		for (long u = 0; u < 2 * NB; u++) a[u] = (pk_vf){0};
		for (long d = 0; d < dh; d++) {
			const float qd = qi[d] * scale;
			const float *kd = kt + d * ldt + j0;
			for (long u = 0; u < 2 * NB; u++) a[u] += qd * PK_VLD(kd + PK_VW * u);
		}
		for (long u = 0; u < 2 * NB; u++) PK_VST(sc + j0 + PK_VW * u, a[u]);
	}
	for (; j0 < jhi; j0 += PK_JB) {
		pk_vf a[NB];
		for (long u = 0; u < NB; u++) a[u] = (pk_vf){0};
		for (long d = 0; d < dh; d++) {
			const float qd = qi[d] * scale;
			const float *kd = kt + d * ldt + j0;
			for (long u = 0; u < NB; u++) a[u] += qd * PK_VLD(kd + PK_VW * u);
		}
		for (long u = 0; u < NB; u++) PK_VST(sc + j0 + PK_VW * u, a[u]);
	}
}

// pk_kv_grad_native is the backward's phase 2 for the paths without
// AVX-512: for kg keys at a time, dk_j += Σ_i ds_ij q_i and dv_j += Σ_i
// p_ij dout_i over the queries that see any of them, in 2·kg·dh/PK_VW ≤ 8
// native accumulators (ds and p are zero outside the row spans).
PK_INLINE void pk_kv_grad_native(const float *dsm, long ldt, const float *P, long tk, const float *Q, long ldq,
	const float *dO, long ldo, const long *clo, const long *chi, const long dh, float *dK, long ldk, float *dV,
	long ldv) {
	enum { NCMAX = 16 * PK_MAXV / PK_VW };
	const long nc = dh / PK_VW;
	const long kg = nc <= 2 ? 2 : 1;
	for (long j = 0; j < tk; j += kg) {
		const long nk = tk - j < kg ? tk - j : kg;
		long i0 = clo[j], i1 = chi[j];
		for (long u = 1; u < nk; u++) {
			i0 = clo[j + u] < i0 ? clo[j + u] : i0;
			i1 = chi[j + u] > i1 ? chi[j + u] : i1;
		}
		if (i0 >= i1) continue;
		pk_vf ak[2][NCMAX], av[2][NCMAX];
		for (long u = 0; u < 2; u++)
			for (long c = 0; c < nc; c++) ak[u][c] = av[u][c] = (pk_vf){0};
		if (nk == 2) {
			for (long i = i0; i < i1; i++) {
				const float *dsi = dsm + i * ldt + j, *pi = P + i * tk + j;
				const float *qi = Q + i * ldq, *doi = dO + i * ldo;
				for (long c = 0; c < nc; c++) {
					const pk_vf qv = PK_VLD(qi + PK_VW * c), dv = PK_VLD(doi + PK_VW * c);
					ak[0][c] += dsi[0] * qv;
					av[0][c] += pi[0] * dv;
					ak[1][c] += dsi[1] * qv;
					av[1][c] += pi[1] * dv;
				}
			}
		} else {
			for (long i = i0; i < i1; i++) {
				const float ds0 = dsm[i * ldt + j], p0 = P[i * tk + j];
				const float *qi = Q + i * ldq, *doi = dO + i * ldo;
				for (long c = 0; c < nc; c++) {
					ak[0][c] += ds0 * PK_VLD(qi + PK_VW * c);
					av[0][c] += p0 * PK_VLD(doi + PK_VW * c);
				}
			}
		}
		for (long u = 0; u < nk; u++) {
			float *dkj = dK + (j + u) * ldk, *dvj = dV + (j + u) * ldv;
			for (long c = 0; c < nc; c++) {
				PK_VST(dkj + PK_VW * c, PK_VLD(dkj + PK_VW * c) + ak[u][c]);
				PK_VST(dvj + PK_VW * c, PK_VLD(dvj + PK_VW * c) + av[u][c]);
			}
		}
	}
}
#endif

// The forward computes, per (batch, head), the probability rows of a tile of
// queries and then out = P·V for the tile four queries at a time, so that
// each v_j load feeds four independent FMA chains (the same restructuring
// doubled the backward). With probs (training) the tile is all Tq queries
// and the rows go to the caller's buffer. In inference (probs == NULL) the
// tile is as many queries as fit the stack scratch (PK_ATT_TILE floats of
// probabilities), so the rows stay in L1/L2 and nothing is allocated:
// materialising all Tq rows per call cost a 3.6 MB malloc per head for the
// network's cross-attention and ≈10 % of inference in page faults.
//
// In inference without a mask every query takes the same arithmetic
// wherever it sits in the call (uniform): the keys are transposed even for
// fewer than four queries, and a tile's last queries that do not fill a
// group of four go through the four-query routines (scores, softmax, P·V)
// with zero queries as padding. A query's result then does not depend on
// how many queries share its call or on its position there, so the
// network's rows do not depend on the batch, its row chunks or its
// segments (cross-attention runs a segment's queries as one call).
PK_INLINE void pk_attn_fwd_body(const pk_attn_shape *s, const float *q, const float *k, const float *v,
	const unsigned char *allow, long bstride, float *out, float *probs, long lo, long hi, const long dh) {
	const long H = s->H, Tq = s->Tq, Tk = s->Tk;
	const long ldt = (Tk + PK_JB - 1) & ~(long)(PK_JB - 1);
	const int uniform = !probs && !allow;
	const int transposed = Tq >= 4 || uniform;
	long tile = Tq;
	if (!probs) {
		tile = PK_ATT_TILE / ldt;
		tile = tile < 4 ? 4 : tile & ~3L;
		tile = tile > Tq ? Tq : tile;
	}
	const long tile4 = (tile + 3) & ~3L; // rows of scratch: a padded last group fits
	float stack[PK_STACK] __attribute__((aligned(64)));
	pk_scratch scr;
	pk_scratch_init(&scr, stack, (transposed ? pk_round(dh * ldt) : 0) + pk_round(ldt) +
		(probs ? 0 : pk_round(tile4 * ldt)) + pk_round(2 * tile4 * sizeof(long) / sizeof(float)));
	float *kt = transposed ? pk_take(&scr, dh * ldt) : NULL;
	float *sc = pk_take(&scr, ldt);
	float *pm = probs ? NULL : pk_take(&scr, tile4 * ldt); // probabilities when the caller keeps none
	const long ldp = probs ? Tk : ldt;
	long *rlo0 = pk_take(&scr, 2 * tile4 * sizeof(long) / sizeof(float));
	if (kt) memset(kt, 0, dh * ldt * sizeof(float));
	const float scale = 1.0f / sqrtf((float)dh);
	for (long bh = lo; bh < hi; bh++) {
		const long b = bh / H, h = bh % H;
		const float *Q0 = q + b * Tq * s->ldq + h * dh;
		const float *K = k + b * Tk * s->ldk + h * dh;
		const float *V = v + b * Tk * s->ldv + h * dh;
		float *O0 = out + b * Tq * s->ldo + h * dh;
		if (transposed) pk_transpose(K, s->ldk, Tk, dh, kt, ldt);
		for (long t0 = 0; t0 < Tq; t0 += tile) {
		// Rows [t0, t0+nt) of the tile, indexed from 0 below.
		const long nt = Tq - t0 < tile ? Tq - t0 : tile;
		const float *Q = Q0 + t0 * s->ldq;
		float *O = O0 + t0 * s->ldo;
		float *P = probs ? probs + bh * Tq * Tk + t0 * Tk : pm;
		long *rlo = rlo0, *rhi = rlo0 + tile4;
		const unsigned char *allow_t = allow ? allow + b * bstride + t0 * Tk : NULL;
		// Inference with Dh = 16: scores of four queries at a time straight
		// into their probability rows (the softmax below then works in place);
		// the last one to three queries with zero queries as padding (P has
		// tile4 rows).
		long ns = 0, nsm = 0;
		if (!probs && transposed && dh == 16) {
			for (; ns < nt; ns += 4) {
				const float *Qg = Q + ns * s->ldq;
				long ldq = s->ldq;
				float qpad[4][16] __attribute__((aligned(64)));
				if (ns + 4 > nt) {
					memset(qpad, 0, sizeof qpad);
					for (long r = 0; r < nt - ns; r++) memcpy(qpad[r], Qg + r * s->ldq, 16 * sizeof(float));
					Qg = &qpad[0][0];
					ldq = 16;
				}
#if defined(__AVX2__) && !defined(__AVX512F__)
				pk_scores4_16_avx2(Qg, ldq, kt, ldt, ldt / 16, scale, P + ns * ldp, ldp);
#else
				pk_scores4_16(Qg, ldq, kt, ldt, ldt / 16, scale, P + ns * ldp, ldp);
#endif
			}
			ns = nt;
		}
		// Without a mask, the softmax of those rows four at a time (the last
		// group with its padding rows).
#if defined(__AVX512F__)
		if (!allow_t)
			for (; nsm < ns; nsm += 4) pk_softmax4(P + nsm * ldp, ldp, Tk);
#elif defined(__AVX2__)
		if (!allow_t)
			for (; nsm < ns; nsm += 4) pk_softmax4_avx2(P + nsm * ldp, ldp, Tk);
#endif
		// Probability rows, zero outside the allowed span.
		for (long i = 0; i < nt; i++) {
			const unsigned char *a = allow_t ? allow_t + i * Tk : NULL;
			float *p = P + i * ldp;
			long jlo, jhi;
			pk_mask_range(a, Tk, &jlo, &jhi);
			rlo[i] = jlo;
			rhi[i] = jhi;
			if (i < ns) {
				if (i >= nsm && jlo < jhi) {
					const float inv = 1.0f / pk_softmax_row(p, jlo, jhi, a);
					for (long j = jlo; j < jhi; j++) p[j] *= inv;
				}
				for (long j = 0; j < jlo; j++) p[j] = 0;
				for (long j = jhi; j < Tk; j++) p[j] = 0;
				continue;
			}
			for (long j = 0; j < jlo; j++) p[j] = 0;
			for (long j = jhi; j < Tk; j++) p[j] = 0;
			if (jlo >= jhi) continue;
			const float *qi = Q + i * s->ldq;
			if (transposed)
#if defined(__AVX512F__)
				pk_scores(qi, kt, ldt, jlo, jhi, dh, scale, sc);
#else
				if (dh % PK_VW == 0)
					pk_scores_native(qi, kt, ldt, jlo, jhi, dh, scale, sc);
				else
					pk_scores(qi, kt, ldt, jlo, jhi, dh, scale, sc);
#endif
			else
				pk_scores_direct(qi, K, s->ldk, jlo, jhi, dh, scale, sc);
			const float inv = 1.0f / pk_softmax_row(sc, jlo, jhi, a);
			for (long j = jlo; j < jhi; j++) p[j] = sc[j] * inv;
		}
		// Padding rows of the last group of four see every key (uniform);
		// without the four-query scores above (Dh ≠ 16) their
		// probabilities are zeros.
		if (uniform)
			for (long i = nt; i < ((nt + 3) & ~3L); i++) {
				rlo[i] = 0;
				rhi[i] = Tk;
				if (dh != 16) memset(P + i * ldp, 0, Tk * sizeof(float));
			}
		// out = P·V.
		long i0 = 0;
#if !defined(__AVX512F__)
		if (dh % PK_VW == 0 && dh <= 16 * PK_MAXV) {
			pk_pv_native(P, ldp, V, s->ldv, rlo, rhi, nt, Tk, dh, O, s->ldo, 0);
			i0 = nt;
		}
#endif
		if (i0 == nt) {
			// done above
		} else if (PK_VEC(dh)) {
			const long ldv = s->ldv;
			// Eight queries at a time for Dh = 16: four FMA chains (one per
			// query) are bound by the FMA latency, one key per 4 cycles;
			// eight chains fill both FMA ports, each v_j load feeding
			// eight FMAs. Every query still sums over j in order, so the
			// result is the same bit for bit.
			if (dh == 16)
				for (; i0 + 8 <= nt; i0 += 8) {
					long j0, j1;
					pk_key_span(rlo + i0, rhi + i0, 8, Tk, &j0, &j1);
					pk_v16 a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0}, a4 = {0}, a5 = {0}, a6 = {0}, a7 = {0};
					const float *p0 = P + i0 * ldp;
					for (long j = j0; j < j1; j++) {
						const pk_v16 vv = PK_LD(V + j * ldv);
						a0 += p0[j] * vv;
						a1 += p0[ldp + j] * vv;
						a2 += p0[2 * ldp + j] * vv;
						a3 += p0[3 * ldp + j] * vv;
						a4 += p0[4 * ldp + j] * vv;
						a5 += p0[5 * ldp + j] * vv;
						a6 += p0[6 * ldp + j] * vv;
						a7 += p0[7 * ldp + j] * vv;
					}
					float *o = O + i0 * s->ldo;
					PK_ST(o, a0);
					PK_ST(o + s->ldo, a1);
					PK_ST(o + 2 * s->ldo, a2);
					PK_ST(o + 3 * s->ldo, a3);
					PK_ST(o + 4 * s->ldo, a4);
					PK_ST(o + 5 * s->ldo, a5);
					PK_ST(o + 6 * s->ldo, a6);
					PK_ST(o + 7 * s->ldo, a7);
				}
			// The last one to three queries, when uniform, as a padded group
			// of four into a local buffer (each query sums over j in order).
			float obuf[4 * 16 * PK_MAXV] __attribute__((aligned(64)));
			for (; i0 + 4 <= nt || (uniform && i0 < nt); i0 += 4) {
				float *og = i0 + 4 <= nt ? O + i0 * s->ldo : obuf;
				const long ldog = i0 + 4 <= nt ? s->ldo : dh;
				long j0, j1;
				pk_key_span(rlo + i0, rhi + i0, 4, Tk, &j0, &j1);
				pk_v16 acc[4][PK_MAXV];
				for (long r = 0; r < 4; r++)
					for (long c = 0; c < dh / 16; c++) acc[r][c] = (pk_v16){0};
				const float *p0 = P + i0 * ldp;
				for (long j = j0; j < j1; j++) {
					const float *vj = V + j * ldv;
					for (long c = 0; c < dh / 16; c++) {
						const pk_v16 vv = PK_LD(vj + 16 * c);
						acc[0][c] += p0[j] * vv;
						acc[1][c] += p0[ldp + j] * vv;
						acc[2][c] += p0[2 * ldp + j] * vv;
						acc[3][c] += p0[3 * ldp + j] * vv;
					}
				}
				for (long r = 0; r < 4; r++) {
					float *o = og + r * ldog;
					for (long c = 0; c < dh / 16; c++) PK_ST(o + 16 * c, acc[r][c]);
				}
				if (og == obuf)
					for (long r = 0; r < nt - i0; r++) memcpy(O + (i0 + r) * s->ldo, obuf + r * dh, dh * sizeof(float));
			}
			// Remaining queries (all of them when decoding with Tq = 1):
			// four accumulators over j instead.
			for (; i0 < nt; i0++) {
				const float *p = P + i0 * ldp;
				pk_v16 acc[4][PK_MAXV];
				for (long c = 0; c < dh / 16; c++) acc[0][c] = acc[1][c] = acc[2][c] = acc[3][c] = (pk_v16){0};
				long j = rlo[i0];
				const long jhi = rhi[i0];
				for (; j + 4 <= jhi; j += 4) {
					const float *vj = V + j * ldv;
					for (long c = 0; c < dh / 16; c++) {
						acc[0][c] += p[j] * PK_LD(vj + 16 * c);
						acc[1][c] += p[j + 1] * PK_LD(vj + ldv + 16 * c);
						acc[2][c] += p[j + 2] * PK_LD(vj + 2 * ldv + 16 * c);
						acc[3][c] += p[j + 3] * PK_LD(vj + 3 * ldv + 16 * c);
					}
				}
				for (; j < jhi; j++)
					for (long c = 0; c < dh / 16; c++) acc[0][c] += p[j] * PK_LD(V + j * ldv + 16 * c);
				float *o = O + i0 * s->ldo;
				for (long c = 0; c < dh / 16; c++) PK_ST(o + 16 * c, (acc[0][c] + acc[1][c]) + (acc[2][c] + acc[3][c]));
			}
		} else {
			for (long i = 0; i < nt; i++) {
				const float *p = P + i * ldp;
				float *o = O + i * s->ldo;
				for (long d = 0; d < dh; d++) o[d] = 0;
				for (long j = rlo[i]; j < rhi[i]; j++) {
					const float pj = p[j];
					const float *vj = V + j * s->ldv;
					for (long d = 0; d < dh; d++) o[d] += pj * vj[d];
				}
			}
		}
		}
	}
	free(scr.heap);
}

#ifdef __AVX512F__
// pk_attn_fwd_tiny16 is the inference forward without a mask for Dh = 16
// and at most 16 keys: the self-attention over a row's few parameter
// tokens in the denoiser. The general body spends most of its time there
// on set-up per (batch, head) pair (gathers into a zeroed transposed key
// buffer, scores, softmax and P·V each through memory); here the keys are
// transposed in registers, and a query's 16 scores, its softmax and its
// probabilities stay in one vector. The sums are formed as in the general
// body (scores over d in order from the scaled query, P·V over j in
// order), so results agree to float32 rounding of the normalisation.
static void pk_attn_fwd_tiny16(const pk_attn_shape *s, const float *q, const float *k, const float *v, float *out,
	long lo, long hi) {
	const long H = s->H, Tq = s->Tq, Tk = s->Tk;
	const __mmask16 valid = (__mmask16)((1u << Tk) - 1);
	const __m512 scale = _mm512_set1_ps(1.0f / sqrtf(16.0f));
	float qs[8][16] __attribute__((aligned(64))), pr[8][16] __attribute__((aligned(64)));
	for (long bh = lo; bh < hi; bh++) {
		const long b = bh / H, h = bh % H;
		const float *Q = q + b * Tq * s->ldq + h * 16;
		const float *K = k + b * Tk * s->ldk + h * 16;
		const float *V = v + b * Tk * s->ldv + h * 16;
		float *O = out + b * Tq * s->ldo + h * 16;
		__m512 kt[16];
		for (long j = 0; j < 16; j++) kt[j] = j < Tk ? _mm512_loadu_ps(K + j * s->ldk) : _mm512_setzero_ps();
		pk_transpose16x16(kt); // kt[d]: component d of every key
		// Up to eight queries at a time, each step over d or j feeding
		// eight independent FMA chains: one query's chain of 16 dependent
		// FMAs (64 cycles) per score vector left the core mostly idle.
		for (long i0 = 0; i0 < Tq; i0 += 8) {
			const long nq = Tq - i0 < 8 ? Tq - i0 : 8;
			__m512 sc[8];
			for (long r = 0; r < 8; r++) {
				sc[r] = _mm512_setzero_ps();
				if (r < nq) _mm512_store_ps(qs[r], _mm512_mul_ps(_mm512_loadu_ps(Q + (i0 + r) * s->ldq), scale));
			}
			for (long d = 0; d < 16; d++)
				for (long r = 0; r < 8; r++)
					if (r < nq) sc[r] = _mm512_fmadd_ps(_mm512_set1_ps(qs[r][d]), kt[d], sc[r]);
			for (long r = 0; r < nq; r++) {
				const __m512 x = _mm512_mask_blend_ps(valid, _mm512_set1_ps(-INFINITY), sc[r]);
				const __m512 e = pk_exp16(_mm512_sub_ps(x, _mm512_set1_ps(_mm512_reduce_max_ps(x))));
				const float inv = 1.0f / _mm512_reduce_add_ps(e);
				_mm512_store_ps(pr[r], _mm512_mul_ps(e, _mm512_set1_ps(inv)));
			}
			__m512 o[8];
			for (long r = 0; r < 8; r++) o[r] = _mm512_setzero_ps();
			for (long j = 0; j < Tk; j++) {
				const __m512 vj = _mm512_loadu_ps(V + j * s->ldv);
				for (long r = 0; r < 8; r++)
					if (r < nq) o[r] = _mm512_fmadd_ps(_mm512_set1_ps(pr[r][j]), vj, o[r]);
			}
			for (long r = 0; r < nq; r++) _mm512_storeu_ps(O + (i0 + r) * s->ldo, o[r]);
		}
	}
}
#endif

void pk_attn_fwd(long Tq, long Tk, long H, long Dh, long ldq, long ldk, long ldv, long ldo, const float *q, const float *k, const float *v,
	const unsigned char *allow, long bstride, float *out, float *probs, long lo, long hi) {
	PK_FTZ;
	const pk_attn_shape sh = {0, Tq, Tk, H, Dh, ldq, ldk, ldv, ldo}, *s = &sh;
#ifdef __AVX512F__
	if (Dh == 16 && Tk >= 1 && Tk <= 16 && !allow && !probs) {
		pk_attn_fwd_tiny16(s, q, k, v, out, lo, hi);
		return;
	}
#endif
	switch (s->Dh) {
	case 16: pk_attn_fwd_body(s, q, k, v, allow, bstride, out, probs, lo, hi, 16); break;
	case 32: pk_attn_fwd_body(s, q, k, v, allow, bstride, out, probs, lo, hi, 32); break;
	case 64: pk_attn_fwd_body(s, q, k, v, allow, bstride, out, probs, lo, hi, 64); break;
	default: pk_attn_fwd_body(s, q, k, v, allow, bstride, out, probs, lo, hi, s->Dh);
	}
}

// The backward runs in two phases per (batch, head). Phase 1, per query i:
// ds_ij = p_ij (dout_i·v_j − dout_i·out_i)·scale into a [Tq][ldt] matrix and
// dq_i += Σ_j ds_ij k_j. Phase 2, per key j: dk_j += Σ_i ds_ij q_i and
// dv_j += Σ_i p_ij dout_i over the queries that see j, accumulated in
// registers and added to the strided outputs once. (A single pass updating
// dk_j, dv_j in memory for every (i, j) was load/store bound: perf showed
// 20 % of the time on the read-modify-write and 11 % on the final adds.)
PK_INLINE void pk_attn_bwd_body(const pk_attn_shape *s, const float *q, const float *k, const float *v,
	const float *probs, const float *out, const float *dout, const unsigned char *allow, long bstride,
	float *dq, float *dk, float *dv, long lo, long hi, const long dh) {
	const long H = s->H, Tq = s->Tq, Tk = s->Tk;
	const long ldt = (Tk + PK_JB - 1) & ~(long)(PK_JB - 1);
	const int transposed = Tq >= 4;
	float stack[PK_STACK] __attribute__((aligned(64)));
	pk_scratch scr;
	pk_scratch_init(&scr, stack, (transposed ? pk_round(dh * ldt) : 0) + pk_round(Tq * ldt) +
		pk_round(2 * (Tq + Tk) * sizeof(long) / sizeof(float)));
	float *vt = transposed ? pk_take(&scr, dh * ldt) : NULL;
	float *dsm = pk_take(&scr, Tq * ldt);
	long *rng = pk_take(&scr, 2 * (Tq + Tk) * sizeof(long) / sizeof(float)); // row spans, then column spans
	long *rlo = rng, *rhi = rng + Tq, *clo = rng + 2 * Tq, *chi = rng + 2 * Tq + Tk;
	if (vt) memset(vt, 0, dh * ldt * sizeof(float));
	const float scale = 1.0f / sqrtf((float)dh);
	for (long bh = lo; bh < hi; bh++) {
		const long b = bh / H, h = bh % H;
		const float *Q = q + b * Tq * s->ldq + h * dh;
		const float *K = k + b * Tk * s->ldk + h * dh;
		const float *V = v + b * Tk * s->ldv + h * dh;
		const float *O = out + b * Tq * s->ldo + h * dh;
		const float *dO = dout + b * Tq * s->ldo + h * dh;
		const float *P = probs + bh * Tq * Tk;
		float *dQ = dq + b * Tq * s->ldq + h * dh;
		if (transposed) pk_transpose(V, s->ldv, Tk, dh, vt, ldt);
		for (long j = 0; j < Tk; j++) {
			clo[j] = Tq;
			chi[j] = 0;
		}
		// Phase 1a: ds rows. dsm is zero outside each row's span (phase 1b
		// and 2 read it without span checks; p is zero there too).
		memset(dsm, 0, Tq * ldt * sizeof(float));
		for (long i = 0; i < Tq; i++) {
			const unsigned char *a = allow ? allow + b * bstride + i * Tk : NULL;
			long jlo, jhi;
			pk_mask_range(a, Tk, &jlo, &jhi);
			rlo[i] = jlo;
			rhi[i] = jhi;
			if (jlo >= jhi) continue;
			const float *p = P + i * Tk;
			const float *doi = dO + i * s->ldo, *oi = O + i * s->ldo;
			float *ds = dsm + i * ldt;
			float delta = 0; // Σ_j p_j dp_j = dout·out
#pragma omp simd reduction(+ : delta)
			for (long d = 0; d < dh; d++) delta += doi[d] * oi[d];
			if (transposed)
#if defined(__AVX512F__)
				pk_scores(doi, vt, ldt, jlo, jhi, dh, 1.0f, ds);
#else
				if (dh % PK_VW == 0)
					pk_scores_native(doi, vt, ldt, jlo, jhi, dh, 1.0f, ds);
				else
					pk_scores(doi, vt, ldt, jlo, jhi, dh, 1.0f, ds);
#endif
			else
				pk_scores_direct(doi, V, s->ldv, jlo, jhi, dh, 1.0f, ds);
			for (long j = jlo; j < jhi; j++) ds[j] = p[j] * (ds[j] - delta) * scale;
			// pk_scores wrote whole blocks of 16: clear around the span.
			for (long j = jlo & ~(long)(PK_JB - 1); j < jlo; j++) ds[j] = 0;
			for (long j = jhi; j < ldt && j < ((jhi + PK_JB - 1) & ~(long)(PK_JB - 1)); j++) ds[j] = 0;
			for (long j = jlo; j < jhi; j++) {
				clo[j] = i < clo[j] ? i : clo[j];
				chi[j] = i + 1;
			}
		}
		// Phase 1b: dq_i += Σ_j ds_ij k_j, four queries at a time so that
		// each k_j load feeds four independent FMA chains.
#if !defined(__AVX512F__)
		const int native = dh % PK_VW == 0 && dh <= 16 * PK_MAXV;
		if (native) pk_pv_native(dsm, ldt, K, s->ldk, rlo, rhi, Tq, Tk, dh, dQ, s->ldq, 1);
#else
		const int native = 0;
#endif
		if (native) {
			// done above
		} else if (PK_VEC(dh)) {
			for (long i0 = 0; i0 < Tq; i0 += 4) {
				const long nr = Tq - i0 < 4 ? Tq - i0 : 4;
				long j0 = Tk, j1 = 0;
				for (long r = 0; r < nr; r++)
					if (rlo[i0 + r] < rhi[i0 + r]) {
						j0 = rlo[i0 + r] < j0 ? rlo[i0 + r] : j0;
						j1 = rhi[i0 + r] > j1 ? rhi[i0 + r] : j1;
					}
				if (j0 >= j1) continue;
				pk_v16 acc[4][PK_MAXV];
				for (long r = 0; r < 4; r++)
					for (long c = 0; c < dh / 16; c++) acc[r][c] = (pk_v16){0};
				const float *d0 = dsm + i0 * ldt;
				if (nr == 4) {
					for (long j = j0; j < j1; j++) {
						const float *kj = K + j * s->ldk;
						for (long c = 0; c < dh / 16; c++) {
							const pk_v16 kv = PK_LD(kj + 16 * c);
							acc[0][c] += d0[j] * kv;
							acc[1][c] += d0[ldt + j] * kv;
							acc[2][c] += d0[2 * ldt + j] * kv;
							acc[3][c] += d0[3 * ldt + j] * kv;
						}
					}
				} else {
					for (long j = j0; j < j1; j++) {
						const float *kj = K + j * s->ldk;
						for (long c = 0; c < dh / 16; c++) {
							const pk_v16 kv = PK_LD(kj + 16 * c);
							for (long r = 0; r < nr; r++) acc[r][c] += d0[r * ldt + j] * kv;
						}
					}
				}
				for (long r = 0; r < nr; r++) {
					float *dqi = dQ + (i0 + r) * s->ldq;
					for (long c = 0; c < dh / 16; c++) PK_ST(dqi + 16 * c, PK_LD(dqi + 16 * c) + acc[r][c]);
				}
			}
		} else {
			for (long i = 0; i < Tq; i++) {
				float *dqi = dQ + i * s->ldq;
				const float *ds = dsm + i * ldt;
				for (long j = rlo[i]; j < rhi[i]; j++)
					for (long d = 0; d < dh; d++) dqi[d] += ds[j] * K[j * s->ldk + d];
			}
		}
		// Phase 2 (ds and p are zero outside the row spans).
		long j = 0;
#if !defined(__AVX512F__)
		if (native) {
			pk_kv_grad_native(dsm, ldt, P, Tk, Q, s->ldq, dO, s->ldo, clo, chi, dh, dk + b * Tk * s->ldk + h * dh, s->ldk,
				dv + b * Tk * s->ldv + h * dh, s->ldv);
			j = Tk;
		}
#endif
		if (PK_VEC(dh) && dh <= 32) {
			// Four keys at a time: eight independent FMA chains, and each
			// q_i, dout_i load feeds four FMAs.
			for (; j + 4 <= Tk; j += 4) {
				long i0 = clo[j], i1 = chi[j];
				for (long u = 1; u < 4; u++) {
					i0 = clo[j + u] < i0 ? clo[j + u] : i0;
					i1 = chi[j + u] > i1 ? chi[j + u] : i1;
				}
				if (i0 >= i1) continue;
				pk_v16 ak[4][PK_MAXV], av[4][PK_MAXV];
				for (long u = 0; u < 4; u++)
					for (long c = 0; c < dh / 16; c++) ak[u][c] = av[u][c] = (pk_v16){0};
				for (long i = i0; i < i1; i++) {
					const float *dsi = dsm + i * ldt + j, *pi = P + i * Tk + j;
					const float *qi = Q + i * s->ldq, *doi = dO + i * s->ldo;
					for (long c = 0; c < dh / 16; c++) {
						const pk_v16 qv = PK_LD(qi + 16 * c), dv = PK_LD(doi + 16 * c);
						for (long u = 0; u < 4; u++) {
							ak[u][c] += dsi[u] * qv;
							av[u][c] += pi[u] * dv;
						}
					}
				}
				for (long u = 0; u < 4; u++) {
					float *dkj = dk + (b * Tk + j + u) * s->ldk + h * dh;
					float *dvj = dv + (b * Tk + j + u) * s->ldv + h * dh;
					for (long c = 0; c < dh / 16; c++) {
						PK_ST(dkj + 16 * c, PK_LD(dkj + 16 * c) + ak[u][c]);
						PK_ST(dvj + 16 * c, PK_LD(dvj + 16 * c) + av[u][c]);
					}
				}
			}
		}
		if (PK_VEC(dh)) {
			// Two keys at a time: four independent FMA chains.
			for (; j + 2 <= Tk; j += 2) {
				const long i0 = clo[j] < clo[j + 1] ? clo[j] : clo[j + 1];
				const long i1 = chi[j] > chi[j + 1] ? chi[j] : chi[j + 1];
				if (i0 >= i1) continue;
				pk_v16 ak0[PK_MAXV], av0[PK_MAXV], ak1[PK_MAXV], av1[PK_MAXV];
				for (long c = 0; c < dh / 16; c++) ak0[c] = av0[c] = ak1[c] = av1[c] = (pk_v16){0};
				for (long i = i0; i < i1; i++) {
					const float ds0 = dsm[i * ldt + j], p0 = P[i * Tk + j];
					const float ds1 = dsm[i * ldt + j + 1], p1 = P[i * Tk + j + 1];
					const float *qi = Q + i * s->ldq, *doi = dO + i * s->ldo;
					for (long c = 0; c < dh / 16; c++) {
						const pk_v16 qv = PK_LD(qi + 16 * c), dv = PK_LD(doi + 16 * c);
						ak0[c] += ds0 * qv;
						av0[c] += p0 * dv;
						ak1[c] += ds1 * qv;
						av1[c] += p1 * dv;
					}
				}
				float *dkj = dk + (b * Tk + j) * s->ldk + h * dh, *dvj = dv + (b * Tk + j) * s->ldv + h * dh;
				for (long c = 0; c < dh / 16; c++) {
					PK_ST(dkj + 16 * c, PK_LD(dkj + 16 * c) + ak0[c]);
					PK_ST(dvj + 16 * c, PK_LD(dvj + 16 * c) + av0[c]);
					PK_ST(dkj + s->ldk + 16 * c, PK_LD(dkj + s->ldk + 16 * c) + ak1[c]);
					PK_ST(dvj + s->ldv + 16 * c, PK_LD(dvj + s->ldv + 16 * c) + av1[c]);
				}
			}
		}
		for (; j < Tk; j++) {
			if (clo[j] >= chi[j]) continue;
			float *dkj = dk + (b * Tk + j) * s->ldk + h * dh;
			float *dvj = dv + (b * Tk + j) * s->ldv + h * dh;
			for (long i = clo[j]; i < chi[j]; i++) {
				const float dsij = dsm[i * ldt + j], pij = P[i * Tk + j];
				const float *qi = Q + i * s->ldq, *doi = dO + i * s->ldo;
				for (long d = 0; d < dh; d++) {
					dkj[d] += dsij * qi[d];
					dvj[d] += pij * doi[d];
				}
			}
		}
	}
	free(scr.heap);
}

void pk_attn_bwd(long Tq, long Tk, long H, long Dh, long ldq, long ldk, long ldv, long ldo, const float *q, const float *k, const float *v,
	const float *probs, const float *out, const float *dout, const unsigned char *allow, long bstride,
	float *dq, float *dk, float *dv, long lo, long hi) {
	PK_FTZ;
	const pk_attn_shape sh = {0, Tq, Tk, H, Dh, ldq, ldk, ldv, ldo}, *s = &sh;
	switch (s->Dh) {
	case 16: pk_attn_bwd_body(s, q, k, v, probs, out, dout, allow, bstride, dq, dk, dv, lo, hi, 16); break;
	case 32: pk_attn_bwd_body(s, q, k, v, probs, out, dout, allow, bstride, dq, dk, dv, lo, hi, 32); break;
	case 64: pk_attn_bwd_body(s, q, k, v, probs, out, dout, allow, bstride, dq, dk, dv, lo, hi, 64); break;
	default: pk_attn_bwd_body(s, q, k, v, probs, out, dout, allow, bstride, dq, dk, dv, lo, hi, s->Dh);
	}
}

// ---- small-k / skinny sgemm ---------------------------------------------------
//
// The network's products have one small dimension (64–1024). For them
// OpenBLAS spends over a third of its time packing the large operand and
// zeroing C for beta = 0 (perf on the reference step: sgemm_kernel 24 %,
// *copy 14 %, memset 3 %). This kernel accepts A with any row and column
// stride (op(A) = A or Aᵀ), packs only small pieces where they are used
// (pk_sgemm_tall, pk_sgemm_short; a generic unpacked loop covers the rest)
// and writes C directly: a 12×32 register tile (24 accumulators) takes one
// broadcast of A per two FMAs and two vector loads of B per 24 FMAs (12×32
// measured 5–15 % faster than 8×32).

#ifdef __AVX512F__
#define PK_MR 12
#define PK_KC 384

// pk_tile_row_store finishes one row of a 12×32 tile whose scaled product
// alpha·acc is (x0, x1): C = x + beta·C on the first k block, C += x on
// later ones; on the last (last != 0) it adds bias and the residual row
// (if given) and stores C, or GELU(C) in place of C when inplace (y == c),
// else also yr = GELU(C) when yr is given.
PK_INLINE void pk_tile_row_store(__m512 x0, __m512 x1, __mmask16 m0, __mmask16 m1, float beta, int first,
	int last, float *cr, const float *bias, const float *resr, float *yr, int inplace) {
	if (!first) {
		x0 = _mm512_add_ps(x0, _mm512_maskz_loadu_ps(m0, cr));
		x1 = _mm512_add_ps(x1, _mm512_maskz_loadu_ps(m1, cr + 16));
	} else if (beta != 0.0f) {
		const __m512 vb = _mm512_set1_ps(beta);
		x0 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m0, cr), x0);
		x1 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m1, cr + 16), x1);
	}
	if (last && bias) {
		x0 = _mm512_add_ps(x0, _mm512_maskz_loadu_ps(m0, bias));
		x1 = _mm512_add_ps(x1, _mm512_maskz_loadu_ps(m1, bias + 16));
	}
	if (last && resr) {
		x0 = _mm512_add_ps(x0, _mm512_maskz_loadu_ps(m0, resr));
		x1 = _mm512_add_ps(x1, _mm512_maskz_loadu_ps(m1, resr + 16));
	}
	if (last && inplace) { // GELU in place: the pre-activation is not kept
		_mm512_mask_storeu_ps(cr, m0, pk_gelu16(x0));
		_mm512_mask_storeu_ps(cr + 16, m1, pk_gelu16(x1));
		return;
	}
	_mm512_mask_storeu_ps(cr, m0, x0);
	_mm512_mask_storeu_ps(cr + 16, m1, x1);
	if (last && yr) {
		_mm512_mask_storeu_ps(yr, m0, pk_gelu16(x0));
		_mm512_mask_storeu_ps(yr + 16, m1, pk_gelu16(x1));
	}
}

// pk_gemm_tile accumulates one tile over kc and stores it: C = alpha·acc
// + beta·C on the first k block, C += alpha·acc on later ones; on the last
// (last != 0) it also adds bias (if any) and writes y = GELU(C) (if y).
PK_INLINE void pk_gemm_tile(const long mr, long kc, const float *a, long ra, long ca, const float *b, long ldb,
	__mmask16 m0, __mmask16 m1, float alpha, float beta, int first, float *c, long ldc, int last,
	const float *bias, float *y, long ldy, const float *res, long ldr) {
	__m512 acc0[PK_MR], acc1[PK_MR];
	for (long r = 0; r < mr; r++) acc0[r] = acc1[r] = _mm512_setzero_ps();
	for (long p = 0; p < kc; p++) {
		const __m512 b0 = _mm512_maskz_loadu_ps(m0, b + p * ldb);
		const __m512 b1 = _mm512_maskz_loadu_ps(m1, b + p * ldb + 16);
		const float *ap = a + p * ca;
		for (long r = 0; r < mr; r++) {
			const __m512 av = _mm512_set1_ps(ap[r * ra]);
			acc0[r] = _mm512_fmadd_ps(av, b0, acc0[r]);
			acc1[r] = _mm512_fmadd_ps(av, b1, acc1[r]);
		}
	}
	const __m512 va = _mm512_set1_ps(alpha);
	for (long r = 0; r < mr; r++)
		pk_tile_row_store(_mm512_mul_ps(va, acc0[r]), _mm512_mul_ps(va, acc1[r]), m0, m1, beta, first, last,
			c + r * ldc, bias, res ? res + r * ldr : NULL, y ? y + r * ldy : NULL, y == c);
}

// pk_gemm_tile_packed is pk_gemm_tile on packed operands: ap holds the
// tile's A as [p][PK_MR] and bp its B as [p][32] (zero padded), so that all
// loads are sequential. Reading A and B in place was as fast on an idle
// core but lost half its speed against OpenBLAS's packed kernel when the
// sibling hyperthread was busy (the strided rows fall out of the shared L1).
PK_INLINE void pk_gemm_tile_packed(const long mr, long kc, const float *ap, const float *bp, __mmask16 m0,
	__mmask16 m1, float alpha, float beta, int first, int last, float *c, long ldc, const float *bias, float *y,
	long ldy, const float *res, long ldr) {
	__m512 acc0[PK_MR], acc1[PK_MR];
	for (long r = 0; r < mr; r++) acc0[r] = acc1[r] = _mm512_setzero_ps();
	for (long p = 0; p < kc; p++) {
		const __m512 b0 = _mm512_loadu_ps(bp + 32 * p), b1 = _mm512_loadu_ps(bp + 32 * p + 16);
		const float *a = ap + PK_MR * p;
		for (long r = 0; r < mr; r++) {
			const __m512 av = _mm512_set1_ps(a[r]);
			acc0[r] = _mm512_fmadd_ps(av, b0, acc0[r]);
			acc1[r] = _mm512_fmadd_ps(av, b1, acc1[r]);
		}
	}
	const __m512 va = _mm512_set1_ps(alpha);
	for (long r = 0; r < mr; r++)
		pk_tile_row_store(_mm512_mul_ps(va, acc0[r]), _mm512_mul_ps(va, acc1[r]), m0, m1, beta, first, last,
			c + r * ldc, bias, res ? res + r * ldr : NULL, y ? y + r * ldy : NULL, y == c);
}

// pk_pack_a packs mr ≤ PK_MR rows of op(A) (op(A)(i, p) = a[i·ra + p·ca])
// over k as [p][PK_MR]. Full tiles of row-major A (ca = 1, the forward
// products) are transposed 16 columns at a time in registers: the scalar
// loop, one load and one store per element, took a quarter of the tall
// kernel's time on the network's n = 64 products, where each packed tile
// serves only two 32-column panels.
static void pk_pack_a(long mr, long k, const float *a, long ra, long ca, float *apk) {
	long p = 0;
	if (mr == PK_MR && ca == 1) {
		for (; p + 16 <= k; p += 16) {
			__m512 r[16];
			for (int i = 0; i < PK_MR; i++) r[i] = _mm512_loadu_ps(a + i * ra + p);
			for (int i = PK_MR; i < 16; i++) r[i] = _mm512_setzero_ps();
			pk_transpose16x16(r);
			for (int j = 0; j < 16; j++) _mm512_mask_storeu_ps(apk + PK_MR * (p + j), 0x0FFF, r[j]);
		}
	}
	for (; p < k; p++)
		for (long r = 0; r < mr; r++) apk[PK_MR * p + r] = a[r * ra + p * ca];
}

// pk_sgemm_tall is pk_sgemm_ep for k ≤ 1024 and m > 256 or row-major A, with packed
// operands: all of op(B) once per call in 32-column panels, and each
// 12-row tile of op(A) before it sweeps the panels.
static void pk_sgemm_tall(long m, long n, long k, float alpha, const float *a, long ra, long ca, const float *b,
	long ldb, int transb, float beta, float *c, long ldc, const float *bias, float *y, long ldy, const float *res,
	long ldr) {
	const long nt = (n + 31) / 32;
	float *bpk = pk_alloc(nt * k * 32);
	for (long t = 0; t < nt; t++) {
		float *dst = bpk + t * k * 32;
		if (!transb) { // rows of the panel are contiguous: masked vector copies
			const long j0 = 32 * t, nr = n - j0;
			const __mmask16 m0 = nr >= 16 ? 0xFFFF : (__mmask16)((1u << nr) - 1);
			const __mmask16 m1 = nr >= 32 ? 0xFFFF : nr <= 16 ? 0 : (__mmask16)((1u << (nr - 16)) - 1);
			for (long p = 0; p < k; p++) {
				_mm512_storeu_ps(dst + 32 * p, _mm512_maskz_loadu_ps(m0, b + p * ldb + j0));
				_mm512_storeu_ps(dst + 32 * p + 16, _mm512_maskz_loadu_ps(m1, b + p * ldb + j0 + 16));
			}
			continue;
		}
		for (long p = 0; p < k; p++)
			for (long u = 0; u < 32; u++) {
				const long j = 32 * t + u;
				dst[32 * p + u] = j >= n ? 0.0f : b[j * ldb + p];
			}
	}
	float apk[PK_MR * 1024] __attribute__((aligned(64)));
	for (long i0 = 0; i0 < m; i0 += PK_MR) {
		const long mr = m - i0 < PK_MR ? m - i0 : PK_MR;
		pk_pack_a(mr, k, a + i0 * ra, ra, ca, apk);
		for (long t = 0; t < nt; t++) {
			const long j0 = 32 * t, nr = n - j0;
			const __mmask16 m0 = nr >= 16 ? 0xFFFF : (__mmask16)((1u << nr) - 1);
			const __mmask16 m1 = nr >= 32 ? 0xFFFF : nr <= 16 ? 0 : (__mmask16)((1u << (nr - 16)) - 1);
			const float *bp = bpk + t * k * 32, *bb = bias ? bias + j0 : NULL;
			float *cij = c + i0 * ldc + j0, *yij = y ? y + i0 * ldy + j0 : NULL;
			const float *rij = res ? res + i0 * ldr + j0 : NULL;
			switch (mr) {
			case 12: pk_gemm_tile_packed(12, k, apk, bp, m0, m1, alpha, beta, 1, 1, cij, ldc, bb, yij, ldy, rij, ldr); break;
			case 11: pk_gemm_tile_packed(11, k, apk, bp, m0, m1, alpha, beta, 1, 1, cij, ldc, bb, yij, ldy, rij, ldr); break;
			case 10: pk_gemm_tile_packed(10, k, apk, bp, m0, m1, alpha, beta, 1, 1, cij, ldc, bb, yij, ldy, rij, ldr); break;
			case 9: pk_gemm_tile_packed(9, k, apk, bp, m0, m1, alpha, beta, 1, 1, cij, ldc, bb, yij, ldy, rij, ldr); break;
			case 8: pk_gemm_tile_packed(8, k, apk, bp, m0, m1, alpha, beta, 1, 1, cij, ldc, bb, yij, ldy, rij, ldr); break;
			case 7: pk_gemm_tile_packed(7, k, apk, bp, m0, m1, alpha, beta, 1, 1, cij, ldc, bb, yij, ldy, rij, ldr); break;
			case 6: pk_gemm_tile_packed(6, k, apk, bp, m0, m1, alpha, beta, 1, 1, cij, ldc, bb, yij, ldy, rij, ldr); break;
			case 5: pk_gemm_tile_packed(5, k, apk, bp, m0, m1, alpha, beta, 1, 1, cij, ldc, bb, yij, ldy, rij, ldr); break;
			case 4: pk_gemm_tile_packed(4, k, apk, bp, m0, m1, alpha, beta, 1, 1, cij, ldc, bb, yij, ldy, rij, ldr); break;
			case 3: pk_gemm_tile_packed(3, k, apk, bp, m0, m1, alpha, beta, 1, 1, cij, ldc, bb, yij, ldy, rij, ldr); break;
			case 2: pk_gemm_tile_packed(2, k, apk, bp, m0, m1, alpha, beta, 1, 1, cij, ldc, bb, yij, ldy, rij, ldr); break;
			default: pk_gemm_tile_packed(1, k, apk, bp, m0, m1, alpha, beta, 1, 1, cij, ldc, bb, yij, ldy, rij, ldr);
			}
		}
	}
	free(bpk);
}

// pk_sgemm_short is pk_sgemm_ep for m ≤ 256 (weight gradients: k is the
// long dimension): per block of 192 k-steps it packs op(A) as 12-row tiles
// and, per 32-column panel, op(B)'s block, then runs all row tiles on the
// panel while it sits in L1.
static void pk_sgemm_short(long m, long n, long k, float alpha, const float *a, long ra, long ca, const float *b,
	long ldb, int transb, float beta, float *c, long ldc, const float *bias, float *y, long ldy, const float *res,
	long ldr) {
	enum { KB = 192 };
	const long mt = (m + PK_MR - 1) / PK_MR;
	float *apk = pk_alloc(mt * PK_MR * KB);
	float bpk[KB * 32] __attribute__((aligned(64)));
	for (long p0 = 0; p0 < k; p0 += KB) {
		const long kc = k - p0 < KB ? k - p0 : KB;
		const int first = p0 == 0, last = p0 + kc >= k;
		for (long t = 0; t < mt; t++) {
			float *dst = apk + t * PK_MR * KB;
			for (long p = 0; p < kc; p++)
				for (long r = 0; r < PK_MR; r++) {
					const long i = t * PK_MR + r;
					dst[PK_MR * p + r] = i < m ? a[i * ra + (p0 + p) * ca] : 0.0f;
				}
		}
		for (long j0 = 0; j0 < n; j0 += 32) {
			const long nr = n - j0;
			for (long p = 0; p < kc; p++)
				for (long u = 0; u < 32; u++) {
					const long j = j0 + u;
					bpk[32 * p + u] = j >= n ? 0.0f : transb ? b[j * ldb + p0 + p] : b[(p0 + p) * ldb + j];
				}
			const __mmask16 m0 = nr >= 16 ? 0xFFFF : (__mmask16)((1u << nr) - 1);
			const __mmask16 m1 = nr >= 32 ? 0xFFFF : nr <= 16 ? 0 : (__mmask16)((1u << (nr - 16)) - 1);
			const float *bb = bias ? bias + j0 : NULL;
			for (long t = 0; t < mt; t++) {
				const long i0 = t * PK_MR, mr = m - i0 < PK_MR ? m - i0 : PK_MR;
				const float *ap = apk + t * PK_MR * KB;
				float *cij = c + i0 * ldc + j0, *yij = y ? y + i0 * ldy + j0 : NULL;
				const float *rij = res ? res + i0 * ldr + j0 : NULL;
				switch (mr) {
				case 12: pk_gemm_tile_packed(12, kc, ap, bpk, m0, m1, alpha, beta, first, last, cij, ldc, bb, yij, ldy, rij, ldr); break;
				case 8: pk_gemm_tile_packed(8, kc, ap, bpk, m0, m1, alpha, beta, first, last, cij, ldc, bb, yij, ldy, rij, ldr); break;
				case 4: pk_gemm_tile_packed(4, kc, ap, bpk, m0, m1, alpha, beta, first, last, cij, ldc, bb, yij, ldy, rij, ldr); break;
				default:
					for (long r = 0; r < mr; r++)
						pk_gemm_tile_packed(1, kc, ap + r, bpk, m0, m1, alpha, beta, first, last, cij + r * ldc, ldc, bb,
							yij ? yij + r * ldy : NULL, ldy, rij ? rij + r * ldr : NULL, ldr);
				}
			}
		}
	}
	free(apk);
}

// pk_sgemm computes C = alpha·op(A)·op(B) + beta·C (row-major, m×n, inner
// dimension k) with op(A)(i, p) = a[i·ra + p·ca] and op(B)(p, j) =
// b[p·ldb + j], or b[j·ldb + p] when transb. Returns 0 when it declines
// (transposed B too large to pack) so the caller can use OpenBLAS.
int pk_sgemm(long m, long n, long k, float alpha, const float *a, long ra, long ca, const float *b, long ldb,
	int transb, float beta, float *c, long ldc) {
	PK_FTZ;
	return pk_sgemm_ep(m, n, k, alpha, a, ra, ca, b, ldb, transb, beta, c, ldc, NULL, NULL, 0, NULL, 0);
}

// pk_sgemm_ep is pk_sgemm with an epilogue applied while each output tile
// is in registers: C += bias (broadcast over rows; NULL for none), then
// C += res (a residual m×n matrix of row stride ldr; NULL for none), then
// y = GELU(C) when y is not NULL (row stride ldy). y == c (with ldy ==
// ldc) stores GELU(C) in place of C: partial sums of earlier k blocks
// still go through C, only the last block's store is replaced.
int pk_sgemm_ep(long m, long n, long k, float alpha, const float *a, long ra, long ca, const float *b, long ldb,
	int transb, float beta, float *c, long ldc, const float *bias, float *y, long ldy, const float *res, long ldr) {
	PK_FTZ;
	// Row-major A (the forward products) takes the tall kernel at every m:
	// its A tiles are packed by in-register transposes, the short
	// kernel's by scalar moves, which cost a quarter of the time on
	// n = 64 products (row chunks of the denoiser split in two pieces of
	// ≤ 256 rows fell there).
	if (k >= 1 && k <= 1024 && (m > 256 || ca == 1)) {
		pk_sgemm_tall(m, n, k, alpha, a, ra, ca, b, ldb, transb, beta, c, ldc, bias, y, ldy, res, ldr);
		return 1;
	}
	if (m <= 256 && k >= 1) {
		pk_sgemm_short(m, n, k, alpha, a, ra, ca, b, ldb, transb, beta, c, ldc, bias, y, ldy, res, ldr);
		return 1;
	}
	float *bp = NULL;
	if (transb) {
		if (k * n > (1L << 20)) return 0;
		bp = pk_alloc(k * n);
		for (long j = 0; j < n; j++)
			for (long p = 0; p < k; p++) bp[p * n + j] = b[j * ldb + p];
		b = bp;
		ldb = n;
	}
	if (k == 0) {
		for (long i = 0; i < m; i++)
			for (long j = 0; j < n; j++) {
				float x = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
				if (bias) x += bias[j];
				if (res) x += res[i * ldr + j];
				c[i * ldc + j] = x;
				if (y) y[i * ldy + j] = pk_gelu(x);
			}
	}
	// Tall products (m large: forward and input gradients) keep an A tile in
	// L1 and sweep B's columns (B stays in L2); short ones (weight
	// gradients: m small, k large) keep a 192×32 B tile in L1 and sweep the
	// rows of A instead.
	const int tall = m >= 512;
	const long kcmax = tall ? PK_KC : 192;
	for (long p0 = 0; p0 < k; p0 += kcmax) {
		const long kc = k - p0 < kcmax ? k - p0 : kcmax;
		const int first = p0 == 0, last = p0 + kc >= k;
		const long outer = tall ? m : n, ostep = tall ? PK_MR : 32;
		const long inner = tall ? n : m, istep = tall ? 32 : PK_MR;
		for (long o = 0; o < outer; o += ostep) {
			for (long in = 0; in < inner; in += istep) {
				const long i0 = tall ? o : in, j0 = tall ? in : o;
				const long mr = m - i0 < PK_MR ? m - i0 : PK_MR;
				const long nr = n - j0;
				const __mmask16 m0 = nr >= 16 ? 0xFFFF : (__mmask16)((1u << nr) - 1);
				const __mmask16 m1 = nr >= 32 ? 0xFFFF : nr <= 16 ? 0 : (__mmask16)((1u << (nr - 16)) - 1);
				const float *ai = a + i0 * ra + p0 * ca;
				const float *bj = b + p0 * ldb + j0;
				float *cij = c + i0 * ldc + j0;
				const float *bb = bias ? bias + j0 : NULL;
				float *yij = y ? y + i0 * ldy + j0 : NULL;
				const float *rij = res ? res + i0 * ldr + j0 : NULL;
				switch (mr) {
				case 12: pk_gemm_tile(12, kc, ai, ra, ca, bj, ldb, m0, m1, alpha, beta, first, cij, ldc, last, bb, yij, ldy, rij, ldr); break;
				case 11: pk_gemm_tile(11, kc, ai, ra, ca, bj, ldb, m0, m1, alpha, beta, first, cij, ldc, last, bb, yij, ldy, rij, ldr); break;
				case 10: pk_gemm_tile(10, kc, ai, ra, ca, bj, ldb, m0, m1, alpha, beta, first, cij, ldc, last, bb, yij, ldy, rij, ldr); break;
				case 9: pk_gemm_tile(9, kc, ai, ra, ca, bj, ldb, m0, m1, alpha, beta, first, cij, ldc, last, bb, yij, ldy, rij, ldr); break;
				case 8: pk_gemm_tile(8, kc, ai, ra, ca, bj, ldb, m0, m1, alpha, beta, first, cij, ldc, last, bb, yij, ldy, rij, ldr); break;
				case 7: pk_gemm_tile(7, kc, ai, ra, ca, bj, ldb, m0, m1, alpha, beta, first, cij, ldc, last, bb, yij, ldy, rij, ldr); break;
				case 6: pk_gemm_tile(6, kc, ai, ra, ca, bj, ldb, m0, m1, alpha, beta, first, cij, ldc, last, bb, yij, ldy, rij, ldr); break;
				case 5: pk_gemm_tile(5, kc, ai, ra, ca, bj, ldb, m0, m1, alpha, beta, first, cij, ldc, last, bb, yij, ldy, rij, ldr); break;
				case 4: pk_gemm_tile(4, kc, ai, ra, ca, bj, ldb, m0, m1, alpha, beta, first, cij, ldc, last, bb, yij, ldy, rij, ldr); break;
				case 3: pk_gemm_tile(3, kc, ai, ra, ca, bj, ldb, m0, m1, alpha, beta, first, cij, ldc, last, bb, yij, ldy, rij, ldr); break;
				case 2: pk_gemm_tile(2, kc, ai, ra, ca, bj, ldb, m0, m1, alpha, beta, first, cij, ldc, last, bb, yij, ldy, rij, ldr); break;
				default: pk_gemm_tile(1, kc, ai, ra, ca, bj, ldb, m0, m1, alpha, beta, first, cij, ldc, last, bb, yij, ldy, rij, ldr);
				}
			}
		}
	}
	free(bp);
	return 1;
}
#else
// The same kernel for the paths without AVX-512, on the portable vectors:
// a PK_GMR×(2·PK_VW) register tile (6×16 with AVX2: twelve ymm
// accumulators, two B vectors and one broadcast of the sixteen registers,
// the shape of BLIS's Haswell kernel; 6×8 in xmm registers otherwise), A
// and B packed as in the AVX-512 kernel. Columns past n are zero in the
// packed panels; their lanes are computed and dropped at the store.
#define PK_GMR 6
#define PK_GNR (2 * PK_VW)

// pk_gv_tail loads the first nr (< PK_VW) floats at p into a vector padded
// with zeros, and pk_gv_store_tail stores the first nr lanes.
PK_INLINE pk_vf pk_gv_load(const float *p, long nr) {
	if (nr >= PK_VW) return PK_VLD(p);
	float t[PK_VW] = {0};
	for (long u = 0; u < nr; u++) t[u] = p[u];
	return PK_VLD(t);
}
PK_INLINE void pk_gv_store(float *p, long nr, pk_vf v) {
	if (nr >= PK_VW) {
		PK_VST(p, v);
		return;
	}
	float t[PK_VW];
	PK_VST(t, v);
	for (long u = 0; u < nr; u++) p[u] = t[u];
}

// pk_gtile_row_store is pk_tile_row_store for one row of the portable tile
// (x0: columns 0..PK_VW-1, x1: the next PK_VW; nr valid columns).
PK_INLINE void pk_gtile_row_store(pk_vf x0, pk_vf x1, long nr, float beta, int first, int last, float *cr,
	const float *bias, const float *resr, float *yr, int inplace) {
	const long n0 = nr < PK_VW ? nr : PK_VW, n1 = nr - PK_VW;
	if (!first) {
		x0 += pk_gv_load(cr, n0);
		if (n1 > 0) x1 += pk_gv_load(cr + PK_VW, n1);
	} else if (beta != 0.0f) {
		x0 = beta * pk_gv_load(cr, n0) + x0;
		if (n1 > 0) x1 = beta * pk_gv_load(cr + PK_VW, n1) + x1;
	}
	if (last && bias) {
		x0 += pk_gv_load(bias, n0);
		if (n1 > 0) x1 += pk_gv_load(bias + PK_VW, n1);
	}
	if (last && resr) {
		x0 += pk_gv_load(resr, n0);
		if (n1 > 0) x1 += pk_gv_load(resr + PK_VW, n1);
	}
	if (last && inplace) {
		x0 = pk_gelu_v(x0);
		x1 = pk_gelu_v(x1);
	}
	pk_gv_store(cr, n0, x0);
	if (n1 > 0) pk_gv_store(cr + PK_VW, n1, x1);
	if (last && yr && !inplace) {
		pk_gv_store(yr, n0, pk_gelu_v(x0));
		if (n1 > 0) pk_gv_store(yr + PK_VW, n1, pk_gelu_v(x1));
	}
}

// pk_gtile accumulates the tile over kc packed steps (ap: [p][PK_GMR], bp:
// [p][PK_GNR]) in registers, each output in one chain over p in order, and
// stores it.
PK_INLINE void pk_gtile(const long mr, long kc, const float *ap, const float *bp, long nr, float alpha, float beta,
	int first, int last, float *c, long ldc, const float *bias, float *y, long ldy, const float *res, long ldr) {
	pk_vf acc0[PK_GMR], acc1[PK_GMR];
	for (long r = 0; r < mr; r++) acc0[r] = acc1[r] = (pk_vf){0};
	for (long p = 0; p < kc; p++) {
		const pk_vf b0 = PK_VLD(bp + PK_GNR * p), b1 = PK_VLD(bp + PK_GNR * p + PK_VW);
		const float *a = ap + PK_GMR * p;
		for (long r = 0; r < mr; r++) {
			acc0[r] += a[r] * b0;
			acc1[r] += a[r] * b1;
		}
	}
	for (long r = 0; r < mr; r++)
		pk_gtile_row_store(alpha * acc0[r], alpha * acc1[r], nr, beta, first, last, c + r * ldc, bias,
			res ? res + r * ldr : NULL, y ? y + r * ldy : NULL, y == c);
}

// pk_gtile_mr dispatches on the tile height so that each case is unrolled
// with its accumulators in registers.
PK_INLINE void pk_gtile_mr(long mr, long kc, const float *ap, const float *bp, long nr, float alpha, float beta,
	int first, int last, float *c, long ldc, const float *bias, float *y, long ldy, const float *res, long ldr) {
	switch (mr) {
	case 6: pk_gtile(6, kc, ap, bp, nr, alpha, beta, first, last, c, ldc, bias, y, ldy, res, ldr); break;
	case 5: pk_gtile(5, kc, ap, bp, nr, alpha, beta, first, last, c, ldc, bias, y, ldy, res, ldr); break;
	case 4: pk_gtile(4, kc, ap, bp, nr, alpha, beta, first, last, c, ldc, bias, y, ldy, res, ldr); break;
	case 3: pk_gtile(3, kc, ap, bp, nr, alpha, beta, first, last, c, ldc, bias, y, ldy, res, ldr); break;
	case 2: pk_gtile(2, kc, ap, bp, nr, alpha, beta, first, last, c, ldc, bias, y, ldy, res, ldr); break;
	default: pk_gtile(1, kc, ap, bp, nr, alpha, beta, first, last, c, ldc, bias, y, ldy, res, ldr);
	}
}

// pk_gpack_b packs columns [j0, j0+PK_GNR) of op(B) over k steps [p0,
// p0+kc) as [p][PK_GNR], zero past n.
static void pk_gpack_b(long kc, long p0, long j0, long n, const float *b, long ldb, int transb, float *dst) {
	const long nr = n - j0 < PK_GNR ? n - j0 : PK_GNR;
	if (!transb && nr == PK_GNR) {
		for (long p = 0; p < kc; p++) {
			const float *src = b + (p0 + p) * ldb + j0;
			PK_VST(dst + PK_GNR * p, PK_VLD(src));
			PK_VST(dst + PK_GNR * p + PK_VW, PK_VLD(src + PK_VW));
		}
		return;
	}
	for (long p = 0; p < kc; p++)
		for (long u = 0; u < PK_GNR; u++)
			dst[PK_GNR * p + u] = u >= nr ? 0.0f : transb ? b[(j0 + u) * ldb + p0 + p] : b[(p0 + p) * ldb + j0 + u];
}

// pk_gpack_a packs mr rows of op(A) over k steps [p0, p0+kc) as [p][PK_GMR]
// (rows past mr zero). dst needs PK_GPACK_SLACK floats of room past its
// end: the AVX2 path stores whole 8-lane columns, each overlapping the
// next column's first two slots before that column is written.
#define PK_GPACK_SLACK 8
static void pk_gpack_a(long mr, long kc, long p0, const float *a, long ra, long ca, float *dst) {
	long p = 0;
	if (mr == PK_GMR && ra == 1) { // a transposed A (weight gradients): each step's rows are contiguous
		for (; p < kc; p++) memcpy(dst + PK_GMR * p, a + (p0 + p) * ca, PK_GMR * sizeof(float));
		return;
	}
#if defined(__AVX2__)
	// Row-major A (the forward products): eight columns at a time through
	// an 8×8 register transpose; the scalar loop below cost a fifth of the
	// k = 64 products' time.
	if (mr == PK_GMR && ca == 1)
		for (; p + 8 <= kc; p += 8) {
			__m256 r[8];
			for (int i = 0; i < PK_GMR; i++) r[i] = _mm256_loadu_ps(a + i * ra + p0 + p);
			r[6] = r[7] = _mm256_setzero_ps();
			pk_transpose8x8(r);
			for (int j = 0; j < 8; j++) _mm256_storeu_ps(dst + PK_GMR * (p + j), r[j]);
		}
#endif
	for (; p < kc; p++)
		for (long r = 0; r < PK_GMR; r++) dst[PK_GMR * p + r] = r < mr ? a[r * ra + (p0 + p) * ca] : 0.0f;
}

int pk_sgemm_ep(long m, long n, long k, float alpha, const float *a, long ra, long ca, const float *b, long ldb,
	int transb, float beta, float *c, long ldc, const float *bias, float *y, long ldy, const float *res, long ldr) {
	PK_FTZ;
	const long nt = (n + PK_GNR - 1) / PK_GNR;
	if (k >= 1 && k <= 1024 && (m > 256 || ca == 1)) {
		// Tall: all of op(B) packed once, each A tile packed once and run
		// over every panel with the whole k in registers (as pk_sgemm_tall).
		float *bpk = pk_alloc(nt * k * PK_GNR);
		for (long t = 0; t < nt; t++) pk_gpack_b(k, 0, PK_GNR * t, n, b, ldb, transb, bpk + t * k * PK_GNR);
		float apk[PK_GMR * 1024 + PK_GPACK_SLACK] __attribute__((aligned(64)));
		for (long i0 = 0; i0 < m; i0 += PK_GMR) {
			const long mr = m - i0 < PK_GMR ? m - i0 : PK_GMR;
			pk_gpack_a(mr, k, 0, a + i0 * ra, ra, ca, apk);
			for (long t = 0; t < nt; t++) {
				const long j0 = PK_GNR * t;
				pk_gtile_mr(mr, k, apk, bpk + t * k * PK_GNR, n - j0, alpha, beta, 1, 1, c + i0 * ldc + j0, ldc,
					bias ? bias + j0 : NULL, y ? y + i0 * ldy + j0 : NULL, ldy, res ? res + i0 * ldr + j0 : NULL, ldr);
			}
		}
		free(bpk);
		return 1;
	}
	if (k == 0) {
		for (long i = 0; i < m; i++)
			for (long j = 0; j < n; j++) {
				float x = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
				if (bias) x += bias[j];
				if (res) x += res[i * ldr + j];
				c[i * ldc + j] = x;
				if (y) y[i * ldy + j] = pk_gelu(x);
			}
		return 1;
	}
	if (m > 256) return 0; // long k and many rows of a transposed A: OpenBLAS
	// Short (weight gradients: k is the long dimension): per block of KB
	// steps, all A tiles packed, then per panel of B the tiles run while
	// the panel sits in L1 (as pk_sgemm_short).
	enum { KB = 192 };
	const long mt = (m + PK_GMR - 1) / PK_GMR;
	float *apk = pk_alloc(mt * PK_GMR * KB + PK_GPACK_SLACK);
	float bpk[KB * PK_GNR] __attribute__((aligned(64)));
	for (long p0 = 0; p0 < k; p0 += KB) {
		const long kc = k - p0 < KB ? k - p0 : KB;
		const int first = p0 == 0, last = p0 + kc >= k;
		if (ra == 1) {
			// Transposed A (weight gradients): step p's m values are one
			// contiguous row; read each row once and deal it out to the
			// tiles (per tile, 24-byte pieces of every row missed L1).
			for (long p = 0; p < kc; p++) {
				const float *src = a + (p0 + p) * ca;
				for (long t = 0; t < mt; t++) {
					const long i0 = t * PK_GMR, mr = m - i0 < PK_GMR ? m - i0 : PK_GMR;
					float *dst = apk + t * PK_GMR * KB + PK_GMR * p;
					if (mr == PK_GMR) {
						memcpy(dst, src + i0, PK_GMR * sizeof(float));
						continue;
					}
					for (long r = 0; r < PK_GMR; r++) dst[r] = r < mr ? src[i0 + r] : 0.0f;
				}
			}
		} else {
			for (long t = 0; t < mt; t++) {
				const long i0 = t * PK_GMR;
				pk_gpack_a(m - i0 < PK_GMR ? m - i0 : PK_GMR, kc, p0, a + i0 * ra, ra, ca, apk + t * PK_GMR * KB);
			}
		}
		for (long j0 = 0; j0 < n; j0 += PK_GNR) {
			pk_gpack_b(kc, p0, j0, n, b, ldb, transb, bpk);
			for (long t = 0; t < mt; t++) {
				const long i0 = t * PK_GMR;
				pk_gtile_mr(m - i0 < PK_GMR ? m - i0 : PK_GMR, kc, apk + t * PK_GMR * KB, bpk, n - j0, alpha, beta,
					first, last, c + i0 * ldc + j0, ldc, bias ? bias + j0 : NULL, y ? y + i0 * ldy + j0 : NULL, ldy,
					res ? res + i0 * ldr + j0 : NULL, ldr);
			}
		}
	}
	free(apk);
	return 1;
}

int pk_sgemm(long m, long n, long k, float alpha, const float *a, long ra, long ca, const float *b, long ldb,
	int transb, float beta, float *c, long ldc) {
	PK_FTZ;
	return pk_sgemm_ep(m, n, k, alpha, a, ra, ca, b, ldb, transb, beta, c, ldc, NULL, NULL, 0, NULL, 0);
}
#endif
