// C kernels of package kernels (kernels_body.h, compiled once per
// instruction set; kernels_dispatch.c forwards each function below to the
// path in use). Every function processes one range [lo, hi) of rows,
// batches or (batch, head) pairs; the Go side splits the work over
// goroutines and makes one call per range.
#ifndef PRISM_KERNELS_H
#define PRISM_KERNELS_H

typedef struct {
	long B, Tq, Tk, H, Dh, ldq, ldk, ldv, ldo;
} pk_attn_shape;

void pk_add_bias(float *y, long lo, long hi, long n, const float *bias);
void pk_bias_grad(const float *dy, long lo, long hi, long n, float *dbias);
void pk_ln_fwd(const float *x, long lo, long hi, long dim, const float *gamma, const float *beta,
	float eps, float *y, float *mean, float *rstd);
void pk_ln_bwd(const float *dy, const float *x, const float *mean, const float *rstd, const float *gamma,
	long lo, long hi, long dim, float *dx, float *dgamma, float *dbeta);
void pk_mod_fwd(const float *h, const float *s, const float *c, long lo, long hi, long t, long d, float *y);
void pk_mod_bwd(const float *dy, const float *h, const float *s, long lo, long hi, long t, long d,
	float *dh, float *ds, float *dc);
void pk_lnmod_fwd(const float *x, long lo, long hi, long t, long d, const float *gamma, const float *beta,
	const float *s, const float *c, float eps, float *y, float *mean, float *rstd);
void pk_lnmod_bwd(const float *dy, const float *x, const float *mean, const float *rstd, const float *gamma,
	const float *beta, const float *s, long lo, long hi, long t, long d,
	float *dx, float *dgamma, float *dbeta, float *ds, float *dc);
void pk_radam_rect(const double *scale, long units, long u0, const float *grad, float *val, float *m, float *v,
	float *ema, long n, float b1, float omb1, float b2, float omb2, float a, float c2, float eps, float dec, float omdec);
void pk_sum_squares2(const float *g, const float *w, long n, double *gacc, double *wacc, long units, long u0);
void pk_gelu_fwd(const float *x, float *y, long n);
void pk_gelu_bwd(const float *dy, const float *x, float *dx, long n);
void pk_bias_gelu_fwd(float *z, long lo, long hi, long n, const float *bias, float *y);
void pk_bias_gelu_bwd(const float *dy, const float *z, long lo, long hi, long n, float *dz, float *dbias);
void pk_attn_fwd(long Tq, long Tk, long H, long Dh, long ldq, long ldk, long ldv, long ldo, const float *q, const float *k, const float *v,
	const unsigned char *allow, long bstride, float *out, float *probs, long lo, long hi);
void pk_attn_bwd(long Tq, long Tk, long H, long Dh, long ldq, long ldk, long ldv, long ldo, const float *q, const float *k, const float *v,
	const float *probs, const float *out, const float *dout, const unsigned char *allow, long bstride,
	float *dq, float *dk, float *dv, long lo, long hi);
int pk_sgemm(long m, long n, long k, float alpha, const float *a, long ra, long ca, const float *b, long ldb,
	int transb, float beta, float *c, long ldc);
int pk_sgemm_ep(long m, long n, long k, float alpha, const float *a, long ra, long ca, const float *b,
	long ldb, int transb, float beta, float *c, long ldc, const float *bias, float *y, long ldy, const float *res,
	long ldr);
void pk_axpy(float alpha, const float *x, float *y, long n);
void pk_add(float *dst, const float *a, const float *b, long n);
void pk_scale(float alpha, float *x, long n);


// Kernel paths, best last.
enum { PK_PATH_GENERIC = 0, PK_PATH_AVX2 = 1, PK_PATH_AVX512 = 2 };
// pk_cpu_supports reports whether this CPU and operating system can run a
// path; pk_set_path switches to it (0 when unsupported, nothing changed).
int pk_cpu_supports(int path);
int pk_set_path(int path);
int pk_get_path(void);

#endif
