// Included by each kernels_<path>.c before kernels_body.h: gives every
// exported kernel of the body the suffix PK_SUFFIX (_generic, _avx2,
// _avx512), so that one binary holds one copy of the kernels per
// instruction set and kernels_dispatch.c picks one at run time.
#ifndef PK_SUFFIX
#error "define PK_SUFFIX before including kernels_rename.h"
#endif
#define PK_CAT2(a, b) a##b
#define PK_CAT(a, b) PK_CAT2(a, b)
#define pk_add_bias PK_CAT(pk_add_bias, PK_SUFFIX)
#define pk_bias_grad PK_CAT(pk_bias_grad, PK_SUFFIX)
#define pk_ln_fwd PK_CAT(pk_ln_fwd, PK_SUFFIX)
#define pk_ln_bwd PK_CAT(pk_ln_bwd, PK_SUFFIX)
#define pk_mod_fwd PK_CAT(pk_mod_fwd, PK_SUFFIX)
#define pk_mod_bwd PK_CAT(pk_mod_bwd, PK_SUFFIX)
#define pk_lnmod_fwd PK_CAT(pk_lnmod_fwd, PK_SUFFIX)
#define pk_lnmod_bwd PK_CAT(pk_lnmod_bwd, PK_SUFFIX)
#define pk_radam_rect PK_CAT(pk_radam_rect, PK_SUFFIX)
#define pk_sum_squares2 PK_CAT(pk_sum_squares2, PK_SUFFIX)
#define pk_gelu_fwd PK_CAT(pk_gelu_fwd, PK_SUFFIX)
#define pk_gelu_bwd PK_CAT(pk_gelu_bwd, PK_SUFFIX)
#define pk_bias_gelu_fwd PK_CAT(pk_bias_gelu_fwd, PK_SUFFIX)
#define pk_bias_gelu_bwd PK_CAT(pk_bias_gelu_bwd, PK_SUFFIX)
#define pk_attn_fwd PK_CAT(pk_attn_fwd, PK_SUFFIX)
#define pk_attn_bwd PK_CAT(pk_attn_bwd, PK_SUFFIX)
#define pk_sgemm PK_CAT(pk_sgemm, PK_SUFFIX)
#define pk_sgemm_ep PK_CAT(pk_sgemm_ep, PK_SUFFIX)
#define pk_axpy PK_CAT(pk_axpy, PK_SUFFIX)
#define pk_add PK_CAT(pk_add, PK_SUFFIX)
#define pk_scale PK_CAT(pk_scale, PK_SUFFIX)
