// Run-time choice of the kernel path. kernels_generic.c, kernels_avx2.c and
// kernels_avx512.c compile kernels_body.h once per instruction set (the
// package is built without -march, so the binary runs on any x86-64 CPU);
// the exported pk_* functions declared in kernels.h forward to the copy
// of the path in use, chosen by the Go side (path_cgo.go) from what the
// CPU and the operating system support, as OpenBLAS's DYNAMIC_ARCH build
// does. Off x86-64 only the generic copy exists.
#include "kernels.h"

#define PK_VARIANT_PROTOS(S)                                                                                      \
	void pk_add_bias##S(float *y, long lo, long hi, long n, const float *bias);                                     \
	void pk_bias_grad##S(const float *dy, long lo, long hi, long n, float *dbias);                                  \
	void pk_ln_fwd##S(const float *x, long lo, long hi, long dim, const float *gamma, const float *beta, float eps, \
		float *y, float *mean, float *rstd);                                                                        \
	void pk_ln_bwd##S(const float *dy, const float *x, const float *mean, const float *rstd, const float *gamma,   \
		long lo, long hi, long dim, float *dx, float *dgamma, float *dbeta);                                        \
	void pk_mod_fwd##S(const float *h, const float *s, const float *c, long lo, long hi, long t, long d, float *y); \
	void pk_mod_bwd##S(const float *dy, const float *h, const float *s, long lo, long hi, long t, long d,          \
		float *dh, float *ds, float *dc);                                                                           \
	void pk_lnmod_fwd##S(const float *x, long lo, long hi, long t, long d, const float *gamma, const float *beta,  \
		const float *s, const float *c, float eps, float *y, float *mean, float *rstd);                             \
	void pk_lnmod_bwd##S(const float *dy, const float *x, const float *mean, const float *rstd,                    \
		const float *gamma, const float *beta, const float *s, long lo, long hi, long t, long d, float *dx,         \
		float *dgamma, float *dbeta, float *ds, float *dc);                                                         \
	void pk_radam_rect##S(const double *scale, long units, long u0, const float *grad, float *val, float *m,      \
		float *v, float *ema, long n, float b1, float omb1, float b2, float omb2, float a, float c2, float eps,      \
		float dec, float omdec);                                                                                    \
	void pk_sum_squares2##S(const float *g, const float *w, long n, double *gacc, double *wacc, long units,       \
		long u0);                                                                                                   \
	void pk_gelu_fwd##S(const float *x, float *y, long n);                                                          \
	void pk_gelu_bwd##S(const float *dy, const float *x, float *dx, long n);                                        \
	void pk_bias_gelu_fwd##S(float *z, long lo, long hi, long n, const float *bias, float *y);                      \
	void pk_bias_gelu_bwd##S(const float *dy, const float *z, long lo, long hi, long n, float *dz, float *dbias);   \
	void pk_attn_fwd##S(long Tq, long Tk, long H, long Dh, long ldq, long ldk, long ldv, long ldo, const float *q, \
		const float *k, const float *v, const unsigned char *allow, long bstride, float *out, float *probs,         \
		long lo, long hi);                                                                                          \
	void pk_attn_bwd##S(long Tq, long Tk, long H, long Dh, long ldq, long ldk, long ldv, long ldo, const float *q, \
		const float *k, const float *v, const float *probs, const float *out, const float *dout,                    \
		const unsigned char *allow, long bstride, float *dq, float *dk, float *dv, long lo, long hi);               \
	int pk_sgemm##S(long m, long n, long k, float alpha, const float *a, long ra, long ca, const float *b,         \
		long ldb, int transb, float beta, float *c, long ldc);                                                      \
	int pk_sgemm_ep##S(long m, long n, long k, float alpha, const float *a, long ra, long ca, const float *b,      \
		long ldb, int transb, float beta, float *c, long ldc, const float *bias, float *y, long ldy,                 \
		const float *res, long ldr);                                                                                \
	void pk_axpy##S(float alpha, const float *x, float *y, long n);                                                 \
	void pk_add##S(float *dst, const float *a, const float *b, long n);                                             \
	void pk_scale##S(float alpha, float *x, long n);

PK_VARIANT_PROTOS(_generic)
#if defined(__x86_64__)
PK_VARIANT_PROTOS(_avx2)
PK_VARIANT_PROTOS(_avx512)
#endif

// pk_path is the path in use (PK_PATH_*); the Go side sets it once at
// start-up (and tests between kernel calls).
static int pk_path = PK_PATH_GENERIC;

int pk_cpu_supports(int path) {
	switch (path) {
	case PK_PATH_GENERIC: return 1;
#if defined(__x86_64__)
	// __builtin_cpu_supports also checks that the operating system saves
	// the YMM (and, for AVX-512, ZMM and mask) registers (XGETBV).
	case PK_PATH_AVX2:
		__builtin_cpu_init();
		return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("bmi2");
	case PK_PATH_AVX512:
		__builtin_cpu_init();
		return pk_cpu_supports(PK_PATH_AVX2) && __builtin_cpu_supports("avx512f") &&
			__builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
			__builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512cd");
#endif
	default: return 0;
	}
}

int pk_set_path(int path) {
	if (!pk_cpu_supports(path)) return 0;
	pk_path = path;
	return 1;
}

int pk_get_path(void) { return pk_path; }

#if defined(__x86_64__)
#define PK_CALL(f, args)                                                                                             \
	switch (pk_path) {                                                                                               \
	case PK_PATH_AVX512: f##_avx512 args; return;                                                                    \
	case PK_PATH_AVX2: f##_avx2 args; return;                                                                        \
	default: f##_generic args; return;                                                                               \
	}
#define PK_RETURN(f, args)                                                                                           \
	switch (pk_path) {                                                                                               \
	case PK_PATH_AVX512: return f##_avx512 args;                                                                     \
	case PK_PATH_AVX2: return f##_avx2 args;                                                                         \
	default: return f##_generic args;                                                                                \
	}
#else
#define PK_CALL(f, args) f##_generic args
#define PK_RETURN(f, args) return f##_generic args
#endif

void pk_add_bias(float *y, long lo, long hi, long n, const float *bias) { PK_CALL(pk_add_bias, (y, lo, hi, n, bias)); }
void pk_bias_grad(const float *dy, long lo, long hi, long n, float *dbias) { PK_CALL(pk_bias_grad, (dy, lo, hi, n, dbias)); }
void pk_ln_fwd(const float *x, long lo, long hi, long dim, const float *gamma, const float *beta, float eps, float *y,
	float *mean, float *rstd) {
	PK_CALL(pk_ln_fwd, (x, lo, hi, dim, gamma, beta, eps, y, mean, rstd));
}
void pk_ln_bwd(const float *dy, const float *x, const float *mean, const float *rstd, const float *gamma, long lo,
	long hi, long dim, float *dx, float *dgamma, float *dbeta) {
	PK_CALL(pk_ln_bwd, (dy, x, mean, rstd, gamma, lo, hi, dim, dx, dgamma, dbeta));
}
void pk_mod_fwd(const float *h, const float *s, const float *c, long lo, long hi, long t, long d, float *y) {
	PK_CALL(pk_mod_fwd, (h, s, c, lo, hi, t, d, y));
}
void pk_mod_bwd(const float *dy, const float *h, const float *s, long lo, long hi, long t, long d, float *dh,
	float *ds, float *dc) {
	PK_CALL(pk_mod_bwd, (dy, h, s, lo, hi, t, d, dh, ds, dc));
}
void pk_lnmod_fwd(const float *x, long lo, long hi, long t, long d, const float *gamma, const float *beta,
	const float *s, const float *c, float eps, float *y, float *mean, float *rstd) {
	PK_CALL(pk_lnmod_fwd, (x, lo, hi, t, d, gamma, beta, s, c, eps, y, mean, rstd));
}
void pk_lnmod_bwd(const float *dy, const float *x, const float *mean, const float *rstd, const float *gamma,
	const float *beta, const float *s, long lo, long hi, long t, long d, float *dx, float *dgamma, float *dbeta,
	float *ds, float *dc) {
	PK_CALL(pk_lnmod_bwd, (dy, x, mean, rstd, gamma, beta, s, lo, hi, t, d, dx, dgamma, dbeta, ds, dc));
}
void pk_radam_rect(const double *scale, long units, long u0, const float *grad, float *val, float *m, float *v,
	float *ema, long n, float b1, float omb1, float b2, float omb2, float a, float c2, float eps, float dec,
	float omdec) {
	PK_CALL(pk_radam_rect, (scale, units, u0, grad, val, m, v, ema, n, b1, omb1, b2, omb2, a, c2, eps, dec, omdec));
}
void pk_sum_squares2(const float *g, const float *w, long n, double *gacc, double *wacc, long units, long u0) {
	PK_CALL(pk_sum_squares2, (g, w, n, gacc, wacc, units, u0));
}
void pk_gelu_fwd(const float *x, float *y, long n) { PK_CALL(pk_gelu_fwd, (x, y, n)); }
void pk_gelu_bwd(const float *dy, const float *x, float *dx, long n) { PK_CALL(pk_gelu_bwd, (dy, x, dx, n)); }
void pk_bias_gelu_fwd(float *z, long lo, long hi, long n, const float *bias, float *y) {
	PK_CALL(pk_bias_gelu_fwd, (z, lo, hi, n, bias, y));
}
void pk_bias_gelu_bwd(const float *dy, const float *z, long lo, long hi, long n, float *dz, float *dbias) {
	PK_CALL(pk_bias_gelu_bwd, (dy, z, lo, hi, n, dz, dbias));
}
void pk_attn_fwd(long Tq, long Tk, long H, long Dh, long ldq, long ldk, long ldv, long ldo, const float *q,
	const float *k, const float *v, const unsigned char *allow, long bstride, float *out, float *probs, long lo,
	long hi) {
	PK_CALL(pk_attn_fwd, (Tq, Tk, H, Dh, ldq, ldk, ldv, ldo, q, k, v, allow, bstride, out, probs, lo, hi));
}
void pk_attn_bwd(long Tq, long Tk, long H, long Dh, long ldq, long ldk, long ldv, long ldo, const float *q,
	const float *k, const float *v, const float *probs, const float *out, const float *dout,
	const unsigned char *allow, long bstride, float *dq, float *dk, float *dv, long lo, long hi) {
	PK_CALL(pk_attn_bwd,
		(Tq, Tk, H, Dh, ldq, ldk, ldv, ldo, q, k, v, probs, out, dout, allow, bstride, dq, dk, dv, lo, hi));
}
int pk_sgemm(long m, long n, long k, float alpha, const float *a, long ra, long ca, const float *b, long ldb,
	int transb, float beta, float *c, long ldc) {
	PK_RETURN(pk_sgemm, (m, n, k, alpha, a, ra, ca, b, ldb, transb, beta, c, ldc));
}
int pk_sgemm_ep(long m, long n, long k, float alpha, const float *a, long ra, long ca, const float *b, long ldb,
	int transb, float beta, float *c, long ldc, const float *bias, float *y, long ldy, const float *res, long ldr) {
	PK_RETURN(pk_sgemm_ep, (m, n, k, alpha, a, ra, ca, b, ldb, transb, beta, c, ldc, bias, y, ldy, res, ldr));
}
void pk_axpy(float alpha, const float *x, float *y, long n) { PK_CALL(pk_axpy, (alpha, x, y, n)); }
void pk_add(float *dst, const float *a, const float *b, long n) { PK_CALL(pk_add, (dst, a, b, n)); }
void pk_scale(float alpha, float *x, long n) { PK_CALL(pk_scale, (alpha, x, n)); }
