// f64 on OpenCL: the cl_khr_fp64 extension (present on PoCL), enabled only in programs
// that compute in double.
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
typedef double f64;
typedef double2 c128;
#define MAKE_C128(re, im) ((c128)((re), (im)))
#define F64_BITS(x) as_ulong(x)
#define F64_FROM_BITS(u) as_double(u)
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
