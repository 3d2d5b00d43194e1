"""Spec inference from the host program without a GPU (issue 40): each rule of the host run
(:mod:`cudasrc.host`) on a small program spelled as real ones are: the command line of the build
file's ``run`` target, argv defaults and flag parsers, config structs, ``<random>`` draws,
``arange`` fills, device queries and out-parameters, and the memory-cap note."""

from __future__ import annotations

from pathlib import Path

from cudasrc import specs
from cudasrc.host import command_lines, launch_of
from cudasrc.source import Document
from cudasrc.specs import ArraySpec, ScalarSpec, infer, roles

SOFTMAX = """\
#include <cstdio>
#include <cstdlib>
#define BLOCK_SIZE 256

__global__ void softMax(const int numSlice, const int sliceSize, const float* src, float* dest) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= numSlice) return;
  for (int j = 0; j < sliceSize; j++) dest[i * sliceSize + j] = src[i * sliceSize + j];
}

__global__ void softMax2(const int numSlice, const int sliceSize, const float* src, float* dest) {
  int i = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  if (i >= numSlice) return;
  for (int j = threadIdx.x % 32; j < sliceSize; j += 32) dest[i * sliceSize + j] = src[i * sliceSize + j];
}

int main(int argc, char* argv[]) {
  if (argc != 5) {
    printf("Usage: %s <number of slices> <slice size> <implementation> <repeat>\\n", argv[0]);
    return 1;
  }
  int numSlice = atoi(argv[1]);
  int sliceSize = atoi(argv[2]);
  int kernel = atoi(argv[3]);
  int repeat = atoi(argv[4]);
  int numElem = numSlice * sliceSize;
  float* input = (float*) aligned_alloc(1024, sizeof(float) * numElem);
  for (int i = 0; i < numSlice; i++)
    for (int j = 0; j < sliceSize; j++)
      input[i*sliceSize+j] = rand() % 13;
  float *d_input, *d_output;
  cudaMalloc((void**)&d_input, sizeof(float) * numElem);
  cudaMalloc((void**)&d_output, sizeof(float) * numElem);
  cudaMemcpy(d_input, input, sizeof(float) * numElem, cudaMemcpyHostToDevice);
  if (kernel == 1) {
    dim3 grids ((numSlice+BLOCK_SIZE/32-1)/(BLOCK_SIZE/32));
    dim3 blocks (BLOCK_SIZE);
    for (int n = 0; n < repeat; n++)
      softMax2<<<grids, blocks>>>(numSlice, sliceSize, d_input, d_output);
  } else {
    dim3 grids ((numSlice+BLOCK_SIZE-1)/BLOCK_SIZE);
    dim3 blocks (BLOCK_SIZE);
    for (int n = 0; n < repeat; n++)
      softMax<<<grids, blocks>>>(numSlice, sliceSize, d_input, d_output);
  }
  return 0;
}
"""

MAKEFILE = """\
NVCC ?= nvcc
softmax: main.cu
\t$(NVCC) -O3 -o $@ main.cu

run: softmax
\t$(LAUNCHER) ./softmax 100000 784 0 100 > out.log
"""


def _kernel_spec(doc: Document, name: str) -> specs.Inference:
    k = doc.kernel(name)
    assert k is not None
    return infer(doc, k)


def _values(spec: specs.KernelSpec) -> dict[str, int]:
    """Each argument's count (arrays) or value (scalars) at the benchmark sizes."""
    p = specs.problem(spec, specs.bench_sizes(spec))
    return {a.name: (a.count if a.role != "scalar" else int(a.value)) for a in p.args}


def _program(tmp_path: Path, text: str, makefile: str | None = None) -> Document:
    (tmp_path / "main.cu").write_text(text)
    if makefile is not None:
        (tmp_path / "Makefile").write_text(makefile)
    return Document.from_file(tmp_path / "main.cu")


def test_the_run_target_of_the_makefile_gives_argv(tmp_path: Path) -> None:
    """Sizes from argv without defaults (`argc != 5` exits): the Makefile's run line supplies them."""
    inf = _kernel_spec(_program(tmp_path, SOFTMAX, MAKEFILE), "softMax")
    assert _values(inf.spec) == {
        "numSlice": 100000,
        "sliceSize": 784,
        "src": 78400000,
        "dest": 78400000,
    }
    p = specs.problem(inf.spec, specs.bench_sizes(inf.spec))
    assert p.launch.grid == (391, 1, 1) and p.launch.block == (256, 1, 1)
    src = next(a for a in inf.spec.args if a.name == "src")
    assert isinstance(src, ArraySpec) and src.dist.text() == "randint(0, 13)"  # through aligned_alloc
    assert any("`./softmax 100000 784 0 100` at " in r and "Makefile:6" in r for r in inf.reasons)


def test_an_argument_that_picks_the_implementation_is_left_unknown(tmp_path: Path) -> None:
    """softMax2 runs only with implementation 1, which no run line asks for: the run with that
    argument unknown takes both branches and reaches it, at the run line's sizes."""
    inf = _kernel_spec(_program(tmp_path, SOFTMAX, MAKEFILE), "softMax2")
    assert _values(inf.spec)["numSlice"] == 100000
    assert specs.problem(inf.spec, specs.bench_sizes(inf.spec)).launch.grid == (12500, 1, 1)
    assert any("./softmax 100000 784 0 100` at " in r and "argument 3 unknown" in r for r in inf.reasons)


def test_without_a_run_target_argv_has_no_arguments(tmp_path: Path) -> None:
    doc = _program(tmp_path, SOFTMAX)
    assert launch_of(doc, "softMax") is None  # `argc != 5`: the program stops before any launch
    text = """\
#include <cstdlib>
__global__ void scale(float *x, int n) { int i = threadIdx.x + blockIdx.x * blockDim.x; if (i < n) x[i] *= 2; }
int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 1 << 22;
  float *x;
  cudaMalloc(&x, n * sizeof(float));
  scale<<<(n + 255) / 256, 256>>>(x, n);
}
"""
    assert _kernel_spec(Document(text), "scale").spec.sizes == {"n": "1 << 22"}


def test_flag_parsers_given_no_arguments_leave_the_defaults() -> None:
    """`checkCmdLineFlag`/`getCmdLineArgumentInt` (cuda-samples' helper_string.h, not read) and
    `getopt` find no flag: the defaults stand, neither branch is taken."""
    text = """\
#include <helper_functions.h>
#include <unistd.h>
__global__ void fill(float *x, int n, int m) { int i = threadIdx.x; if (i < n) x[i] = m; }
int main(int argc, char **argv) {
  int n = 1 << 20;
  int m = 64;
  if (checkCmdLineFlag(argc, (const char **)argv, "n")) {
    n = getCmdLineArgumentInt(argc, (const char **)argv, "n");
  }
  int c;
  while ((c = getopt(argc, argv, "m:")) != -1) {
    switch (c) { case 'm': m = atoi(optarg); break; }
  }
  float *x;
  cudaMalloc(&x, n * sizeof(float));
  fill<<<n / 256, 256>>>(x, n, m);
}
"""
    inf = _kernel_spec(Document(text), "fill")
    assert _values(inf.spec) == {"x": 1 << 20, "n": 1 << 20, "m": 64}
    assert not any("both branches" in r for r in inf.reasons)


def test_sizes_and_launch_from_a_config_struct() -> None:
    text = """\
struct Config {
  int n = 1 << 20;
  int block = 256;
  float alpha = 2.0f;
};
struct Shape { int rows; int cols; };
__global__ void axpy(const float *x, float *y, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
__global__ void rows(float *m, int r, int c) { m[blockIdx.x * c + threadIdx.x] = r; }
int main(int argc, char **argv) {
  Config cfg;
  cfg.block = 128;
  Shape s = {48, 1000};
  Shape t{.rows = 7, .cols = 9};
  float *x, *y, *m;
  cudaMalloc(&x, cfg.n * sizeof(float));
  cudaMalloc(&y, cfg.n * sizeof(float));
  cudaMalloc(&m, s.rows * s.cols * sizeof(float));
  int grid = (cfg.n + cfg.block - 1) / cfg.block;
  axpy<<<grid, cfg.block>>>(x, y, cfg.alpha, cfg.n);
  rows<<<s.rows, t.cols>>>(m, s.rows, s.cols);
}
"""
    doc = Document(text)
    axpy = _kernel_spec(doc, "axpy").spec
    assert _values(axpy) == {"x": 1 << 20, "y": 1 << 20, "n": 1 << 20, "a": 2}
    p = specs.problem(axpy, specs.bench_sizes(axpy))
    assert p.launch.grid == (8192, 1, 1) and p.launch.block == (128, 1, 1)
    r = _kernel_spec(doc, "rows").spec
    assert _values(r) == {"m": 48000, "r": 48, "c": 1000}
    assert specs.problem(r, specs.bench_sizes(r)).launch.block == (9, 1, 1)


def test_draws_of_random_distribution_objects() -> None:
    text = """\
#include <random>
__global__ void k(const float *key, const int *idx, float *out, int n) {
  int i = threadIdx.x; if (i < n) out[i] = key[i] * idx[i];
}
int main() {
  const int n = 4096;
  float *key = (float*) malloc(n * sizeof(float));
  int *idx = (int*) malloc(n * sizeof(int));
  std::mt19937 gen(19937);
  std::uniform_real_distribution<float> dist(-0.01f, 0.01f);
  std::uniform_int_distribution<int> pick(1, 6);
  for (int i = 0; i < n; i++) { key[i] = dist(gen); idx[i] = pick(gen); }
  float *d_key, *d_out; int *d_idx;
  cudaMalloc(&d_key, n * sizeof(float));
  cudaMalloc(&d_idx, n * sizeof(int));
  cudaMalloc(&d_out, n * sizeof(float));
  cudaMemcpy(d_key, key, n * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemcpy(d_idx, idx, n * sizeof(int), cudaMemcpyHostToDevice);
  k<<<n / 256, 256>>>(d_key, d_idx, d_out, n);
}
"""
    dists = {
        a.name: a.dist.text() for a in _kernel_spec(Document(text), "k").spec.args if isinstance(a, ArraySpec)
    }
    assert dists["key"] == "uniform(-0.01, 0.01)"
    assert dists["idx"] == "randint(1, 7)"  # the high end included


def test_an_array_filled_with_its_own_index_is_an_arange() -> None:
    """transpose.cu's `h_idata[j*nx + i] = j*nx + i`; a const input keeps it through launches
    (copy, then transpose: both read idata), a written one does not."""
    text = """\
const int TILE_DIM = 32;
__global__ void copy(float *odata, const float *idata) {
  int x = blockIdx.x * TILE_DIM + threadIdx.x;
  odata[x] = idata[x];
}
__global__ void transpose(float *odata, const float *idata) {
  int x = blockIdx.x * TILE_DIM + threadIdx.x;
  odata[x] = idata[x];
}
int main() {
  const int nx = 1024, ny = 1024;
  const int mem_size = nx * ny * sizeof(float);
  float *h_idata = (float*)malloc(mem_size);
  for (int j = 0; j < ny; j++)
    for (int i = 0; i < nx; i++)
      h_idata[j*nx + i] = j*nx + i;
  float *d_idata, *d_odata;
  cudaMalloc(&d_idata, mem_size);
  cudaMalloc(&d_odata, mem_size);
  cudaMemcpy(d_idata, h_idata, mem_size, cudaMemcpyHostToDevice);
  cudaMemcpy(d_odata, h_idata, mem_size, cudaMemcpyHostToDevice);
  copy<<<nx * ny / TILE_DIM, TILE_DIM>>>(d_odata, d_idata);
  transpose<<<nx * ny / TILE_DIM, TILE_DIM>>>(d_odata, d_idata);
}
"""
    doc = Document(text)
    for name in ("copy", "transpose"):
        args = {a.name: a for a in _kernel_spec(doc, name).spec.args if isinstance(a, ArraySpec)}
        assert args["idata"].dist.text() == "arange", name
    odata = next(a for a in _kernel_spec(doc, "transpose").spec.args if a.name == "odata")
    assert isinstance(odata, ArraySpec) and odata.role == "out"


def test_a_kernel_that_writes_a_zeroed_buffer_ends_its_zeros() -> None:
    """attention's exp_sum: cudaMemset to 0, summed into by kernel 1, divided by in kernel 2."""
    text = """\
__global__ void k1(const float *x, float *sum, int n) { atomicAdd(sum, x[threadIdx.x]); }
__global__ void k2(const float *sum, const float *x, float *y, int n) { y[threadIdx.x] = x[threadIdx.x] / sum[0]; }
int main() {
  const int n = 4096;
  float *x, *y, *sum;
  cudaMalloc(&x, n * sizeof(float));
  cudaMalloc(&y, n * sizeof(float));
  cudaMalloc(&sum, sizeof(float));
  for (int k = 0; k < 10; k++) {
    cudaMemset(sum, 0, 4);
    k1<<<n / 256, 256>>>(x, sum, n);
    k2<<<n / 256, 256>>>(sum, x, y, n);
  }
}
"""
    doc = Document(text)
    first = next(a for a in _kernel_spec(doc, "k1").spec.args if a.name == "sum")
    later = next(a for a in _kernel_spec(doc, "k2").spec.args if a.name == "sum")
    assert isinstance(first, ArraySpec) and first.dist.text() == "const(0)"
    assert isinstance(later, ArraySpec) and later.dist.text() == "uniform(-1, 1)"


def test_sizes_from_the_device_through_an_out_parameter() -> None:
    """FDTD3d's default volume: device memory (an H100's) through `*result = memsize` of a helper,
    halved, cube root, clamped with MIN/MAX macros of an unread header; block set field by field,
    grid `ceil((float)dimx / block.x)`."""
    text = """\
#define k_dim_max 376
#define k_blockDimX 32
#define k_blockDimMaxY 16
typedef unsigned long long memsize_t;
__global__ void stencil(float *out, const float *in, int dimx, int dimy) {
  out[blockIdx.y * dimx + blockIdx.x] = in[blockIdx.y * dimx + blockIdx.x];
}
bool deviceMemory(memsize_t *result) {
  struct cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  *result = (memsize_t)prop.totalGlobalMem;
  return true;
}
int main(int argc, char **argv) {
  memsize_t memsize;
  deviceMemory(&memsize);
  memsize /= 2;
  int dim = (int)floor(pow((memsize / (2.0 * sizeof(float))), 1.0 / 3.0));
  if (dim > k_dim_max) dim = k_dim_max;
  int dimx = dim, dimy = dim;
  float *in, *out;
  cudaMalloc(&in, dimx * dimy * sizeof(float));
  cudaMalloc(&out, dimx * dimy * sizeof(float));
  struct cudaFuncAttributes attr;
  cudaFuncGetAttributes(&attr, stencil);
  int threads = MIN(k_blockDimX * k_blockDimMaxY, attr.maxThreadsPerBlock);
  dim3 block;
  dim3 grid;
  block.x = k_blockDimX;
  block.y = threads / k_blockDimX;
  grid.x = (unsigned int)ceil((float)dimx / block.x);
  grid.y = (unsigned int)ceil((float)dimy / block.y);
  stencil<<<grid, block>>>(out, in, dimx, dimy);
}
"""
    spec = _kernel_spec(Document(text), "stencil").spec
    assert _values(spec) == {"out": 376 * 376, "in": 376 * 376, "dimx": 376, "dimy": 376}
    launch = specs.problem(spec, specs.bench_sizes(spec)).launch
    assert launch.block == (32, 16, 1) and launch.grid == (12, 24, 1)


def test_a_pointer_moved_by_its_offset_is_not_read() -> None:
    doc = Document(
        "__global__ void rows(float *d_Dst, float *d_Src, int pitch) {\n"
        "  d_Src += blockIdx.x * pitch;\n"
        "  d_Dst += blockIdx.x * pitch;\n"
        "  d_Dst[threadIdx.x] = d_Src[threadIdx.x];\n"
        "}\n"
    )
    k = doc.kernel("rows")
    assert k is not None
    assert roles(doc, k) == {"d_Dst": "out", "d_Src": "in"}


def test_sizes_beyond_the_default_memory_cap_say_so() -> None:
    text = """\
__global__ void scale(float *x, long n) { long i = threadIdx.x + blockIdx.x * (long)blockDim.x; if (i < n) x[i] *= 2; }
int main() {
  long n = 1L << 29;
  float *x;
  cudaMalloc(&x, n * sizeof(float));
  scale<<<(n + 255) / 256, 256>>>(x, n);
}
"""
    inf = _kernel_spec(Document(text), "scale")
    (note,) = [r for r in inf.reasons if "memory cap" in r]
    assert "2.0 GiB of arrays, 3 times over" in note
    small = text.replace("1L << 29", "1L << 20")
    assert not any("memory cap" in r for r in _kernel_spec(Document(small), "scale").reasons)


def test_cpu_code_of_a_unit_beside_main_is_run(tmp_path: Path) -> None:
    """FDTD3d's shape: main in src/app.cpp calls generateRandomData of src/reference.cpp and a
    launcher of src/gpu.cu, which launches the kernel of inc/kernel.cuh."""
    (tmp_path / "inc").mkdir()
    (tmp_path / "src").mkdir()
    (tmp_path / "inc" / "kernel.cuh").write_text(
        "__global__ void smooth(float *out, const float *in, int n) {\n"
        "  int i = threadIdx.x + blockIdx.x * blockDim.x; if (i < n) out[i] = in[i];\n}\n"
    )
    (tmp_path / "src" / "gpu.cu").write_text(
        '#include "../inc/kernel.cuh"\n'
        "void smoothGPU(float *h_out, const float *h_in, int n) {\n"
        "  float *d_in, *d_out;\n"
        "  cudaMalloc(&d_in, n * sizeof(float));\n"
        "  cudaMalloc(&d_out, n * sizeof(float));\n"
        "  cudaMemcpy(d_in, h_in, n * sizeof(float), cudaMemcpyHostToDevice);\n"
        "  smooth<<<(n + 127) / 128, 128>>>(d_out, d_in, n);\n}\n"
    )
    (tmp_path / "src" / "reference.cpp").write_text(
        "#include <cstdlib>\n"
        "void generateRandomData(float *data, int n, float lo, float hi) {\n"
        "  for (int i = 0; i < n; i++) { *data = lo + ((float)rand() / (float)RAND_MAX) * (hi - lo); ++data; }\n}\n"
    )
    (tmp_path / "src" / "app.cpp").write_text(
        "void generateRandomData(float *data, int n, float lo, float hi);\n"
        "void smoothGPU(float *h_out, const float *h_in, int n);\n"
        "int main() {\n"
        "  int n = 1 << 20;\n"
        "  float *in = (float *)malloc(n * sizeof(float));\n"
        "  float *out = (float *)malloc(n * sizeof(float));\n"
        "  generateRandomData(in, n, 0.0f, 1.0f);\n"
        "  smoothGPU(out, in, n);\n}\n"
    )
    (tmp_path / "Makefile").write_text("app: src/app.cpp src/gpu.cu src/reference.cpp\n\tnvcc -o app $^\n")
    spec = _kernel_spec(Document.from_file(tmp_path / "inc" / "kernel.cuh"), "smooth").spec
    assert spec.sizes == {"n": "1 << 20"}
    src = next(a for a in spec.args if a.name == "in")
    assert isinstance(src, ArraySpec) and src.dist.text() == "uniform(0, 1)"


def test_run_target_commands(tmp_path: Path) -> None:
    (tmp_path / "Makefile").write_text(
        "program = main\n"
        "run: $(program)\n"
        "\t$(LAUNCHER) ./$(program) 65536 2048 0 100\n"
        "\t@./main 8192 8192 1 100 | tee log\n"
        "\techo done\n"
        "clean:\n"
        "\trm -f main\n"
        "VAR := run: not a target\n"
    )
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "main.cu").write_text("int main() {}\n")
    lines = command_lines(str(tmp_path / "sub" / "main.cu"))  # the Makefile of the folder above
    assert [args for args, _ in lines] == [("65536", "2048", "0", "100"), ("8192", "8192", "1", "100")]
    assert [shown.rsplit(":", 1)[1] for _, shown in lines] == ["3", "4"]
    assert lines[1][1].startswith("`./main 8192 8192 1 100` at ")


def test_scalars_of_the_run_line_keep_their_names(tmp_path: Path) -> None:
    spec = _kernel_spec(_program(tmp_path, SOFTMAX, MAKEFILE), "softMax").spec
    scalars = {a.name: a.value for a in spec.args if isinstance(a, ScalarSpec)}
    assert scalars == {"numSlice": "numSlice", "sliceSize": "sliceSize"}
