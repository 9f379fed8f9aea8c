// The CUDA C++ dialect of polytensor's C-family kernels (compiled by NVRTC): the
// fixed-width type names, the qualifiers, the thread indices and the math function names
// the shared kernel text uses.
typedef signed char i8;
typedef short i16;
typedef int i32;
typedef long long i64;
typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;
typedef float f32;
typedef float2 c64;
typedef ulonglong2 raw16;
typedef double f64;
typedef double2 c128;

#define KERNEL extern "C" __global__
#define GLOBAL
#define LOCAL __shared__
#define FN static __device__ inline
#define BARRIER() __syncthreads()
// Unroll the loop that follows (constant trip count): keeps small arrays in registers.
#define UNROLL _Pragma("unroll")
#define GLOBAL_ID ((i64)blockIdx.x * (i64)blockDim.x + (i64)threadIdx.x)
#define GLOBAL_SIZE ((i64)gridDim.x * (i64)blockDim.x)
#define LOCAL_ID ((i64)threadIdx.x)
#define LOCAL_SIZE ((i64)blockDim.x)
#define GROUP_ID(d) ((i64)((d) == 0 ? blockIdx.x : (d) == 1 ? blockIdx.y : blockIdx.z))
#define NUM_GROUPS(d) ((i64)((d) == 0 ? gridDim.x : (d) == 1 ? gridDim.y : gridDim.z))
#define LOCAL_ID2(d) ((i64)((d) == 0 ? threadIdx.x : (d) == 1 ? threadIdx.y : threadIdx.z))

#define MAKE_C64(re, im) make_float2((re), (im))
#define MAKE_C128(re, im) make_double2((re), (im))
#define F32_BITS(x) __float_as_uint(x)
#define F32_FROM_BITS(u) __uint_as_float(u)
#define F64_BITS(x) ((u64)__double_as_longlong(x))
#define F64_FROM_BITS(u) __longlong_as_double((long long)(u))

#define sqrt_f32 sqrtf
#define exp_f32 expf
#define log_f32 logf
#define sin_f32 sinf
#define cos_f32 cosf
#define tanh_f32 tanhf
#define sinh_f32 sinhf
#define cosh_f32 coshf
#define atan2_f32 atan2f
#define floor_f32 floorf
#define ceil_f32 ceilf
#define rint_f32 rintf
#define fabs_f32 fabsf
#define fmod_f32 fmodf
#define pow_f32 powf
#define hypot_f32 hypotf
#define sqrt_f64 sqrt
#define exp_f64 exp
#define log_f64 log
#define sin_f64 sin
#define cos_f64 cos
#define tanh_f64 tanh
#define sinh_f64 sinh
#define cosh_f64 cosh
#define atan2_f64 atan2
#define floor_f64 floor
#define ceil_f64 ceil
#define rint_f64 rint
#define fabs_f64 fabs
#define fmod_f64 fmod
#define pow_f64 pow
#define hypot_f64 hypot

// The hardware's conversions between f16 (bf16 on sm_80 and later) and f32: exact one way,
// rounded to nearest even the other, as the shared helpers in scalar.h, which they replace.
#define NATIVE_F16 1
static __device__ inline f32 f16_to_f32(u16 h) {
    f32 f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}
static __device__ inline u16 f32_to_f16(f32 v) {
    u16 h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(v));
    return h;
}
#if __CUDA_ARCH__ >= 800
#define NATIVE_BF16 1
static __device__ inline u16 f32_to_bf16(f32 v) {
    u16 h;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(v));
    return h;
}
#endif
