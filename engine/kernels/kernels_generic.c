// The kernels for any CPU of the architecture: on x86-64 the baseline
// instruction set (SSE2), elsewhere whatever the compiler targets by
// default. The fallback path, and the only one off x86-64.
#define PK_SUFFIX _generic
#include "kernels_rename.h"
#include "kernels_body.h"
