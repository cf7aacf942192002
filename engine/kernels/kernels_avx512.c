// The kernels for x86-64-v4 CPUs (AVX-512 F/BW/DQ/VL/CD: Intel Skylake-SP
// and later server parts, Ice Lake, AMD Zen 4 and 5), whatever the machine
// that compiles them. gcc prefers 256-bit vectors even with AVX-512
// enabled; prefer-vector-width=512 doubles the width of the loops it
// vectorises itself.
#if defined(__x86_64__)
#pragma GCC target("avx,avx2,fma,bmi,bmi2,lzcnt,popcnt,f16c,movbe,avx512f,avx512bw,avx512dq,avx512vl,avx512cd,prefer-vector-width=512")
#define PK_SUFFIX _avx512
#include "kernels_rename.h"
#include "kernels_body.h"
#endif
