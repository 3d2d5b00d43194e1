/* cuda-agent: NVRTC provides the device stdio.h declarations built in; this header only lets existing #includes compile. */
#pragma once
