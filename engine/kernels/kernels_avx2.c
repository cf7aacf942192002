// The kernels for x86-64-v3 CPUs (AVX2, FMA, BMI2: Intel Haswell and
// later, AMD Zen 1–3), whatever the machine that compiles them.
#if defined(__x86_64__)
#pragma GCC target("avx,avx2,fma,bmi,bmi2,lzcnt,popcnt,f16c,movbe")
#define PK_SUFFIX _avx2
#include "kernels_rename.h"
#include "kernels_body.h"
#endif
