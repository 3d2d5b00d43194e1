#pragma once
#include <cstdio>
#include <cublas_v2.h>

#define CEIL_DIV(a, b) (((a) + (b) - 1) / (b))

extern "C" void check_cublas(cublasStatus_t status, const char* what);
