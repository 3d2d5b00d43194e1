/* cuda-agent: NVRTC provides the device math.h declarations built in; this header only lets existing #includes compile. */
#pragma once
/* The C macros NVRTC lacks, as device expressions (CUDA code writes e.g. `-INFINITY` for a masked score). */
#ifndef INFINITY
#define INFINITY __int_as_float(0x7f800000)
#endif
#ifndef NAN
#define NAN __int_as_float(0x7fffffff)
#endif
#ifndef HUGE_VALF
#define HUGE_VALF __int_as_float(0x7f800000)
#endif
