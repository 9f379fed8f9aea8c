// The OpenCL C dialect of polytensor's C-family kernels: the fixed-width type names, the
// qualifiers, the thread indices and the math function names the shared kernel text uses.
#pragma OPENCL FP_CONTRACT OFF
typedef char i8;
typedef short i16;
typedef int i32;
typedef long i64;
typedef uchar u8;
typedef ushort u16;
typedef uint u32;
typedef ulong u64;
typedef float f32;
typedef float2 c64;
typedef ulong2 raw16;

#define KERNEL __kernel
#define GLOBAL __global
#define LOCAL __local
#define FN static inline
#define BARRIER() barrier(CLK_LOCAL_MEM_FENCE)
// Unroll the loop that follows (constant trip count): keeps small arrays in registers.
#define UNROLL _Pragma("unroll")
#define GLOBAL_ID ((i64)get_global_id(0))
#define GLOBAL_SIZE ((i64)get_global_size(0))
#define LOCAL_ID ((i64)get_local_id(0))
#define LOCAL_SIZE ((i64)get_local_size(0))
#define GROUP_ID(d) ((i64)get_group_id(d))
#define NUM_GROUPS(d) ((i64)get_num_groups(d))
#define LOCAL_ID2(d) ((i64)get_local_id(d))

#define MAKE_C64(re, im) ((c64)((re), (im)))
#define F32_BITS(x) as_uint(x)
#define F32_FROM_BITS(u) as_float(u)

// OpenCL's math functions are overloaded on float and double.
#define sqrt_f32 sqrt
#define exp_f32 exp
#define log_f32 log
#define sin_f32 sin
#define cos_f32 cos
#define tanh_f32 tanh
#define sinh_f32 sinh
#define cosh_f32 cosh
#define atan2_f32 atan2
#define floor_f32 floor
#define ceil_f32 ceil
#define rint_f32 rint
#define fabs_f32 fabs
#define fmod_f32 fmod
#define pow_f32 pow
#define hypot_f32 hypot
