/* cuda-agent: NVRTC provides the device stddef.h declarations built in; this header only lets existing #includes compile. */
#pragma once
