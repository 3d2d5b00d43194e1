#pragma once
// Defined in a prebuilt library this project links against: not readable here.
dim3 grid_for(int n);
size_t staging_bytes(int threads);
