/* cuda-agent: NVRTC provides the device math.h declarations built in; this header only lets existing #includes compile. */
#pragma once
