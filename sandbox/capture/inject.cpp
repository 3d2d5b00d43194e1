// CUDA Agent launch capture: a CUPTI injection library.
//
// Loaded by the CUDA driver into the user's program through CUDA_INJECTION64_PATH (which also works
// for programs that link cudart statically); CUDA calls InitializeInjection() once.  It subscribes to
// the kernel-launch callbacks of the runtime API (cudaLaunchKernel, cudaLaunchKernelExC and CUDA 13's
// __cudaLaunchKernel, which `<<<...>>>` compiles to) and of the driver API (cuLaunchKernel,
// cuLaunchKernelEx: CuPy, Triton, PyTorch's JIT), and writes one JSON line per launch it records to
// the file named by CUDA_AGENT_CAPTURE_OUT:
//
//   {"event":"launch","index":K,"api":"...","kernel":"<demangled>","mangled":"...",
//    "grid":[x,y,z],"block":[x,y,z],"smem":N,"params":[{"index":i,"offset":o,"size":s,"hex":"..",
//      "pointer":{"base":B,"alloc_size":S,"region_start":R,"region_size":Z,"offset":O,
//                 "before":"hash","after":"hash","saved":"file"}}, ...]}
//
// A pointer parameter is an 8-byte value that lies inside a device allocation (cuMemGetAddressRange).
// Pointers into the same allocation split it into regions (each from its pointer to the next one;
// the lowest one from the allocation's base), hashed before the launch and after it (the context
// synchronized, the region copied to the host): a changed hash means the kernel wrote it.
//
// Environment: CUDA_AGENT_CAPTURE_OUT (required), CUDA_AGENT_CAPTURE_KERNEL (ECMAScript regex searched
// in the demangled name), CUDA_AGENT_CAPTURE_LAUNCH (record only the K-th matching launch, 0-based),
// CUDA_AGENT_CAPTURE_MAX (most launches recorded, default 8), CUDA_AGENT_CAPTURE_HASH_CAP (bytes of a
// region hashed at most, default 1 GiB), CUDA_AGENT_CAPTURE_SAVE (a folder: the recorded launch's
// input regions are saved there, raw, before it runs), CUDA_AGENT_CAPTURE_SAVE_CAP (bytes, default
// 256 MiB for all of them), CUDA_AGENT_CAPTURE_INTERNAL=0 (do not read the arguments of CUDA 13's
// __cudaLaunchKernel: leave its launches to the driver callback), CUDA_AGENT_CAPTURE_TIMES=1 (time
// every matching launch on the GPU, all streams and graph launches included, with CUPTI's activity
// API: the kernel records CUPTI writes asynchronously, so timing adds no synchronization; with
// CUDA_AGENT_CAPTURE_MAX=0 nothing else is recorded and the program runs at its own pace).  The last
// line is {"event":"summary", ...}: every matching kernel and how many times it was launched, and
// with times, "times": {kernel: {"launches":N,"ns":T,"streams":S,"shapes":{"gx,gy,gz/bx,by,bz":[N,T]}}}
// and "span_ns" (first kernel's start to last kernel's end).
//
// Nothing here changes what the program computes: the launch runs as the program asked.

// Only the callback API's headers: cupti.h would pull in CUPTI's generated parameter structs for
// every runtime function, which need the runtime headers of CUPTI's exact version.  The launch
// functions' parameter structs are declared below from their (stable) signatures instead.
#include <cuda.h>
#include <cupti_activity.h>
#include <cupti_callbacks.h>
#include <cupti_driver_cbid.h>
#include <cupti_runtime_cbid.h>
#include <cxxabi.h>
#include <dlfcn.h>

#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <regex>
#include <set>
#include <string>
#include <vector>

namespace {

// ------------------------------------------------------------------------------------------ API

// What CUPTI's functionParams points to for each launch function: its arguments, in order.
struct cuLaunchKernel_params {
  CUfunction f;
  unsigned int gridDimX, gridDimY, gridDimZ;
  unsigned int blockDimX, blockDimY, blockDimZ;
  unsigned int sharedMemBytes;
  CUstream hStream;
  void** kernelParams;
  void** extra;
};
struct cuLaunchKernelEx_params {
  const CUlaunchConfig* config;
  CUfunction f;
  void** kernelParams;
  void** extra;
};
struct cudaLaunchKernel_params {
  const void* func;
  dim3 gridDim;
  dim3 blockDim;
  void** args;
  size_t sharedMem;
  cudaStream_t stream;
};
struct cudaLaunchKernelExC_params {
  const cudaLaunchConfig_t* config;
  const void* func;
  void** args;
};
// CUDA 13's `<<<...>>>` entry point, __cudaLaunchKernel (crt/device_functions.h).
struct InternalLaunchParams {
  cudaKernel_t kernel;
  dim3 gridDim;
  dim3 blockDim;
  void** args;
  size_t sharedMem;
  cudaStream_t stream;
};

// ------------------------------------------------------------------------------------------ driver

// The driver entry points are looked up at run time, so the library builds without libcuda.
struct Driver {
  CUresult (*ctx_synchronize)() = nullptr;
  CUresult (*mem_get_address_range)(CUdeviceptr*, size_t*, CUdeviceptr) = nullptr;
  CUresult (*memcpy_dtoh)(void*, CUdeviceptr, size_t) = nullptr;
  CUresult (*func_get_param_info)(CUfunction, size_t, size_t*, size_t*) = nullptr;
  CUresult (*func_get_name)(const char**, CUfunction) = nullptr;
  CUresult (*kernel_get_param_info)(CUkernel, size_t, size_t*, size_t*) = nullptr;
  CUresult (*kernel_get_name)(const char**, CUkernel) = nullptr;
  CUresult (*kernel_get_function)(CUfunction*, CUkernel) = nullptr;
  CUresult (*func_load)(CUfunction) = nullptr;
  CUresult (*stream_is_capturing)(CUstream, CUstreamCaptureStatus*) = nullptr;
  cudaError_t (*get_func_by_symbol)(cudaFunction_t*, const void*) = nullptr;  // the program's cudart
};

Driver g_cu;

template <typename F>
void lookup(void* lib, F& slot, const char* name) {
  slot = reinterpret_cast<F>(dlsym(lib, name));
}

bool load_driver() {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (lib == nullptr) lib = dlopen("libcuda.so.1", RTLD_NOW);
  if (lib == nullptr) return false;
  lookup(lib, g_cu.ctx_synchronize, "cuCtxSynchronize");
  lookup(lib, g_cu.mem_get_address_range, "cuMemGetAddressRange_v2");
  lookup(lib, g_cu.memcpy_dtoh, "cuMemcpyDtoH_v2");
  lookup(lib, g_cu.func_get_param_info, "cuFuncGetParamInfo");
  lookup(lib, g_cu.func_get_name, "cuFuncGetName");
  lookup(lib, g_cu.kernel_get_param_info, "cuKernelGetParamInfo");
  lookup(lib, g_cu.kernel_get_name, "cuKernelGetName");
  lookup(lib, g_cu.kernel_get_function, "cuKernelGetFunction");
  lookup(lib, g_cu.func_load, "cuFuncLoad");
  lookup(lib, g_cu.stream_is_capturing, "cuStreamIsCapturing");
  // A shared cudart exports this; a static one usually does not (then the driver callback that the
  // runtime launch makes, if any, records the launch).
  lookup(RTLD_DEFAULT, g_cu.get_func_by_symbol, "cudaGetFuncBySymbol");
  return g_cu.ctx_synchronize && g_cu.mem_get_address_range && g_cu.memcpy_dtoh;
}

// ------------------------------------------------------------------------------------------ settings

struct Settings {
  std::string out;
  bool has_regex = false;
  std::regex kernel;
  long long launch = -1;
  long long max = 8;
  unsigned long long hash_cap = 1ull << 30;
  std::string save_dir;
  unsigned long long save_cap = 256ull << 20;
};

Settings g_set;
FILE* g_out = nullptr;
std::mutex g_mutex;
long long g_matching = 0;  // matching launches seen
long long g_recorded = 0;
std::map<std::string, long long> g_counts;  // demangled name -> launches
thread_local bool t_busy = false;           // inside our own work: ignore callbacks
bool g_trust_internal = true;               // read __cudaLaunchKernel's arguments (see runtime_launch)

long long env_int(const char* name, long long fallback) {
  const char* v = getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  long long x = strtoll(v, &end, 10);
  return (end && *end == '\0') ? x : fallback;
}

// ------------------------------------------------------------------------------------------ helpers

std::string demangle(const char* mangled) {
  if (mangled == nullptr) return "";
  int status = 0;
  char* d = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  if (status != 0 || d == nullptr) return mangled;
  std::string s(d);
  free(d);
  return s;
}

void json_string(std::string& o, const std::string& s) {
  o += '"';
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      o += '\\';
      o += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      snprintf(buf, sizeof buf, "\\u%04x", c);
      o += buf;
    } else {
      o += static_cast<char>(c);
    }
  }
  o += '"';
}

std::string hex(const void* p, size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  const auto* b = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n; ++i) {
    s += digits[b[i] >> 4];
    s += digits[b[i] & 15];
  }
  return s;
}

// A 64-bit hash of a device region, read in chunks (the context is synchronized by the caller).
bool hash_region(CUdeviceptr at, size_t size, std::string& out, std::vector<unsigned char>* keep) {
  size_t n = size < g_set.hash_cap ? size : static_cast<size_t>(g_set.hash_cap);
  const size_t chunk = 16u << 20;
  std::vector<unsigned char> buf(n < chunk ? n : chunk);
  uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
  for (size_t done = 0; done < n;) {
    size_t m = n - done < chunk ? n - done : chunk;
    if (g_cu.memcpy_dtoh(buf.data(), at + done, m) != CUDA_SUCCESS) return false;
    if (keep) keep->insert(keep->end(), buf.data(), buf.data() + m);
    size_t i = 0;
    for (; i + 8 <= m; i += 8) {
      uint64_t w;
      memcpy(&w, buf.data() + i, 8);
      h = (h ^ w) * 0x100000001b3ull;
      h ^= h >> 29;
    }
    for (; i < m; ++i) h = (h ^ buf[i]) * 0x100000001b3ull;
    done += m;
  }
  char s[24];
  snprintf(s, sizeof s, "%016" PRIx64, h);
  out = s;
  return true;
}

// ------------------------------------------------------------------------------------------ launches

struct Param {
  size_t offset = 0, size = 0;
  std::vector<unsigned char> bytes;
  bool pointer = false;
  CUdeviceptr value = 0, base = 0, region_start = 0;
  size_t alloc_size = 0, region_size = 0;
  std::string before, after, saved;
};

// One launch being recorded, between the callback before it and the one after it.
struct Pending {
  bool active = false;
  long long index = 0;
  std::string api, kernel, mangled, note;
  unsigned grid[3] = {1, 1, 1}, block[3] = {1, 1, 1};
  size_t smem = 0;
  std::vector<Param> params;
  bool hashed = false;
};

// What launched it: a function (driver, or runtime resolved), or a CUDA 13 runtime kernel handle.
struct Callee {
  CUfunction function = nullptr;
  CUkernel kernel = nullptr;
  const char* name = nullptr;  // mangled
};

// The parameter table of the launched function.  A handle may be a CUfunction, or a CUkernel
// (CUDA 12+ lets cuLaunchKernel take a CUkernel cast to CUfunction, which cudart does); with lazy
// loading (the default since CUDA 12.2) a function is loaded at its first launch, after the entry
// callback, so it is loaded first (cuFuncLoad).  Each way is tried; the last failure is kept for the
// record's note.
CUresult g_param_error = CUDA_SUCCESS;

bool param_info(const Callee& c, size_t i, size_t* off, size_t* size) {
  CUresult e = CUDA_ERROR_NOT_SUPPORTED;
  auto as_function = [&](CUfunction f) {
    if (f == nullptr || g_cu.func_get_param_info == nullptr) return false;
    if (i == 0 && g_cu.func_load) g_cu.func_load(f);
    e = g_cu.func_get_param_info(f, i, off, size);
    return e == CUDA_SUCCESS;
  };
  auto as_kernel = [&](CUkernel k) {
    if (k == nullptr) return false;
    if (g_cu.kernel_get_param_info) {
      e = g_cu.kernel_get_param_info(k, i, off, size);
      if (e == CUDA_SUCCESS) return true;
    }
    CUfunction f = nullptr;
    return g_cu.kernel_get_function && g_cu.kernel_get_function(&f, k) == CUDA_SUCCESS && as_function(f);
  };
  bool ok = as_function(c.function) || as_kernel(c.kernel) || as_kernel(reinterpret_cast<CUkernel>(c.function));
  if (i == 0) g_param_error = e;
  return ok;
}

// Without a parameter table (the driver refuses every handle): the sizes from the demangled
// signature, for parameters of scalar and pointer types (a struct or an unknown type: none).
bool sizes_from_signature(const std::string& demangled, std::vector<size_t>& sizes) {
  size_t open = demangled.find('('), close = demangled.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close < open) return false;
  std::string list = demangled.substr(open + 1, close - open - 1);
  if (list.empty() || list == "void") return true;
  static const std::map<std::string, size_t> scalar = {
      {"bool", 1}, {"char", 1}, {"signed char", 1}, {"unsigned char", 1}, {"short", 2}, {"unsigned short", 2},
      {"int", 4}, {"unsigned int", 4}, {"long", 8}, {"unsigned long", 8}, {"long long", 8},
      {"unsigned long long", 8}, {"float", 4}, {"double", 8}, {"__half", 2}, {"__nv_bfloat16", 2},
      {"half", 2}, {"__nv_half", 2}};
  int depth = 0;
  std::string item;
  auto take = [&](std::string t) {
    while (!t.empty() && t.front() == ' ') t.erase(t.begin());
    while (!t.empty() && t.back() == ' ') t.pop_back();
    if (t.find('*') != std::string::npos) {
      sizes.push_back(8);
      return true;
    }
    for (const char* q : {"const ", "volatile "})
      for (size_t at; (at = t.find(q)) != std::string::npos;) t.erase(at, strlen(q));
    for (const char* q : {" const", " volatile"})
      for (size_t at; (at = t.find(q)) != std::string::npos;) t.erase(at, strlen(q));
    auto it = scalar.find(t);
    if (it == scalar.end()) return false;
    sizes.push_back(it->second);
    return true;
  };
  for (char ch : list) {
    if (ch == '<' || ch == '(' || ch == '[') ++depth;
    if (ch == '>' || ch == ')' || ch == ']') --depth;
    if (ch == ',' && depth == 0) {
      if (!take(item)) return false;
      item.clear();
    } else {
      item += ch;
    }
  }
  return take(item);
}

const char* callee_name(const Callee& c) {
  const char* name = nullptr;
  if (c.function && g_cu.func_get_name && g_cu.func_get_name(&name, c.function) == CUDA_SUCCESS && name) return name;
  if (c.kernel && g_cu.kernel_get_name && g_cu.kernel_get_name(&name, c.kernel) == CUDA_SUCCESS && name) return name;
  return c.name;
}

// The launch's parameters: values from kernelParams (or the `extra` buffer), pointers resolved to
// their allocations and split into regions.
void read_params(Pending& p, const Callee& c, void** args, void** extra) {
  const unsigned char* buffer = nullptr;
  if (args == nullptr && extra != nullptr) {
    for (size_t i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
      if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER) buffer = static_cast<const unsigned char*>(extra[i + 1]);
    }
  }
  std::vector<size_t> signature;  // the fallback's sizes, when the driver gives no table
  bool from_signature = false;
  size_t first_offset = 0, first_size = 0;
  if (!param_info(c, 0, &first_offset, &first_size))
    from_signature = args != nullptr && sizes_from_signature(p.kernel, signature);
  size_t next_offset = 0;
  for (size_t i = 0; i < 4096; ++i) {
    size_t off = 0, size = 0;
    if (from_signature) {
      if (i >= signature.size()) break;
      size = signature[i];
      off = (next_offset + size - 1) / size * size;
      next_offset = off + size;
    } else if (!param_info(c, i, &off, &size)) {
      break;
    }
    Param q;
    q.offset = off;
    q.size = size;
    const unsigned char* src = args ? static_cast<const unsigned char*>(args[i]) : buffer ? buffer + off : nullptr;
    if (src) q.bytes.assign(src, src + size);
    if (src && size == 8) {
      CUdeviceptr v;
      memcpy(&v, src, 8);
      CUdeviceptr base = 0;
      size_t alloc = 0;
      if (v != 0 && g_cu.mem_get_address_range(&base, &alloc, v) == CUDA_SUCCESS && alloc > 0) {
        q.pointer = true;
        q.value = v;
        q.base = base;
        q.alloc_size = alloc;
      }
    }
    p.params.push_back(std::move(q));
  }
  if (from_signature)
    p.note = "parameter sizes from the kernel's signature (cuFuncGetParamInfo: CUresult " +
             std::to_string(int(g_param_error)) + ")";
  else if (p.params.empty())
    p.note = "parameter sizes not available (cuFuncGetParamInfo: CUresult " + std::to_string(int(g_param_error)) +
             "; needs a CUDA 12.4+ driver)";
  for (auto& q : p.params) {
    if (!q.pointer) continue;
    // From the pointer (the allocation's base for the lowest one: its offset is padding) to the
    // next pointer into the same allocation, or the allocation's end.
    CUdeviceptr hi = q.base + q.alloc_size;
    bool lowest = true;
    for (auto& r : p.params) {
      if (!r.pointer || r.base != q.base || r.value == q.value) continue;
      if (r.value < q.value) lowest = false;
      if (r.value > q.value && r.value < hi) hi = r.value;
    }
    q.region_start = lowest ? q.base : q.value;
    q.region_size = static_cast<size_t>(hi - q.region_start);
  }
}

bool capturing(CUstream s) {
  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
  return g_cu.stream_is_capturing && g_cu.stream_is_capturing(s, &st) == CUDA_SUCCESS &&
         st != CU_STREAM_CAPTURE_STATUS_NONE;
}

void hash_all(Pending& p, bool after) {
  if (g_cu.ctx_synchronize() != CUDA_SUCCESS) {
    p.note = "could not synchronize to read memory";
    return;
  }
  unsigned long long saved_bytes = 0;
  std::map<std::pair<CUdeviceptr, size_t>, std::string> seen;  // aliasing parameters hash once
  for (size_t i = 0; i < p.params.size(); ++i) {
    Param& q = p.params[i];
    if (!q.pointer) continue;
    std::string& h = after ? q.after : q.before;
    auto key = std::make_pair(q.region_start, q.region_size);
    auto it = seen.find(key);
    if (it != seen.end() && (after || g_set.save_dir.empty())) {
      h = it->second;
      continue;
    }
    std::vector<unsigned char> data;
    bool save = !after && !g_set.save_dir.empty() && saved_bytes + q.region_size <= g_set.save_cap &&
                q.region_size <= g_set.hash_cap;
    if (!hash_region(q.region_start, q.region_size, h, save ? &data : nullptr)) h = "";
    seen[key] = h;
    if (save && !h.empty()) {
      char name[64];
      snprintf(name, sizeof name, "launch%lld_param%zu.bin", p.index, i);
      std::string path = g_set.save_dir + "/" + name;
      if (FILE* f = fopen(path.c_str(), "wb")) {
        if (fwrite(data.data(), 1, data.size(), f) == data.size()) {
          q.saved = name;
          saved_bytes += data.size();
        }
        fclose(f);
      }
    }
  }
}

void write_record(const Pending& p) {
  std::string o = "{\"event\":\"launch\",\"index\":" + std::to_string(p.index) + ",\"api\":";
  json_string(o, p.api);
  o += ",\"kernel\":";
  json_string(o, p.kernel);
  o += ",\"mangled\":";
  json_string(o, p.mangled);
  char dims[160];
  snprintf(dims, sizeof dims, ",\"grid\":[%u,%u,%u],\"block\":[%u,%u,%u],\"smem\":%zu", p.grid[0], p.grid[1],
           p.grid[2], p.block[0], p.block[1], p.block[2], p.smem);
  o += dims;
  if (!p.note.empty()) {
    o += ",\"note\":";
    json_string(o, p.note);
  }
  o += ",\"params\":[";
  for (size_t i = 0; i < p.params.size(); ++i) {
    const Param& q = p.params[i];
    char head[96];
    snprintf(head, sizeof head, "%s{\"index\":%zu,\"offset\":%zu,\"size\":%zu,\"hex\":\"", i ? "," : "", i, q.offset,
             q.size);
    o += head;
    o += hex(q.bytes.data(), q.bytes.size());
    o += '"';
    if (q.pointer) {
      char ptr[256];
      snprintf(ptr, sizeof ptr,
               ",\"pointer\":{\"value\":%llu,\"base\":%llu,\"alloc_size\":%zu,\"region_start\":%llu,"
               "\"region_size\":%zu,\"offset\":%llu,\"before\":\"%s\",\"after\":\"%s\"",
               (unsigned long long)q.value, (unsigned long long)q.base, q.alloc_size,
               (unsigned long long)q.region_start, q.region_size, (unsigned long long)(q.value - q.region_start),
               q.before.c_str(), q.after.c_str());
      o += ptr;
      if (!q.saved.empty()) {
        o += ",\"saved\":";
        json_string(o, q.saved);
      }
      o += '}';
    }
    o += '}';
  }
  o += "]}\n";
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_out) {
    fputs(o.c_str(), g_out);
    fflush(g_out);
  }
}

// Counts the launch and decides whether to record it; fills what every API gives.
bool begin(Pending& p, const char* api, const Callee& c, const unsigned grid[3], const unsigned block[3],
           size_t smem, CUstream stream) {
  const char* mangled = callee_name(c);
  std::string name = demangle(mangled);
  if (g_set.has_regex && !std::regex_search(name, g_set.kernel)) return false;
  long long index;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    index = g_matching++;
    g_counts[name] += 1;
    bool wanted = (g_set.launch < 0 || index == g_set.launch) && g_recorded < g_set.max;
    if (!wanted) return false;
    g_recorded += 1;
  }
  p = Pending();
  p.active = true;
  p.index = index;
  p.api = api;
  p.kernel = name;
  p.mangled = mangled ? mangled : "";
  for (int d = 0; d < 3; ++d) {
    p.grid[d] = grid[d];
    p.block[d] = block[d];
  }
  p.smem = smem;
  (void)stream;
  return true;
}

void enter(Pending& p, const Callee& c, void** args, void** extra, CUstream stream) {
  read_params(p, c, args, extra);
  if (capturing(stream)) {
    p.note = "launched into a CUDA graph being captured: memory not read";
    return;
  }
  hash_all(p, false);
  p.hashed = true;
}

void leave(Pending& p) {
  if (!p.active) return;
  if (p.hashed) hash_all(p, true);
  write_record(p);
  p.active = false;
}

// Per thread: the launch in flight, seen by the runtime callback or the driver callback.  A runtime
// launch may call the driver's launch (and its callback) inside it: whichever sees it first with
// the kernel's parameters records it, and the other stays quiet.
thread_local Pending t_runtime, t_driver;
thread_local bool t_in_runtime = false;  // between a runtime launch's callbacks
thread_local bool t_claimed = false;     // that runtime launch was recorded or filtered out

// The runtime launch's configuration and kernel, when CUPTI hands over its arguments.
struct RuntimeLaunch {
  const char* api = "";
  Callee callee;
  dim3 grid, block;
  size_t smem = 0;
  void** args = nullptr;
  cudaStream_t stream = nullptr;
  bool resolved = false;  // callee known: parameters readable
};

bool runtime_launch(CUpti_CallbackId cbid, const void* fp, RuntimeLaunch& r) {
  switch (cbid) {
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000:
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000: {
      auto* q = static_cast<const cudaLaunchKernel_params*>(fp);
      r.api = "cudaLaunchKernel";
      r.grid = q->gridDim, r.block = q->blockDim, r.smem = q->sharedMem, r.args = q->args, r.stream = q->stream;
      cudaFunction_t f = nullptr;
      r.resolved = g_cu.get_func_by_symbol && g_cu.get_func_by_symbol(&f, q->func) == cudaSuccess;
      r.callee.function = reinterpret_cast<CUfunction>(f);
      return true;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060:
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060: {
      auto* q = static_cast<const cudaLaunchKernelExC_params*>(fp);
      if (q->config == nullptr) return false;
      r.api = "cudaLaunchKernelExC";
      r.grid = q->config->gridDim, r.block = q->config->blockDim, r.smem = q->config->dynamicSmemBytes;
      r.args = q->args, r.stream = q->config->stream;
      cudaFunction_t f = nullptr;
      r.resolved = g_cu.get_func_by_symbol && g_cu.get_func_by_symbol(&f, q->func) == cudaSuccess;
      r.callee.function = reinterpret_cast<CUfunction>(f);
      return true;
    }
#if CUDA_VERSION >= 13000 && CUPTI_API_VERSION >= 130000
    case CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000:
    case CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000: {
      // CUPTI declares no struct for it: trusted only when the values look like a launch's (a block
      // of 1..1024 threads, a grid, arguments) and the handle names a kernel; else the driver
      // callback it makes records the launch.
      auto* q = static_cast<const InternalLaunchParams*>(fp);
      unsigned threads = q->blockDim.x * q->blockDim.y * q->blockDim.z;
      if (!g_trust_internal || q->kernel == nullptr || threads == 0 || threads > 1024 || q->gridDim.x == 0 ||
          q->gridDim.y == 0 || q->gridDim.z == 0 || q->sharedMem > (1u << 20))
        return false;
      const char* name = nullptr;
      auto k = reinterpret_cast<CUkernel>(q->kernel);
      if (!g_cu.kernel_get_name || g_cu.kernel_get_name(&name, k) != CUDA_SUCCESS || name == nullptr) return false;
      r.api = "__cudaLaunchKernel";
      r.callee.kernel = k;
      r.grid = q->gridDim, r.block = q->blockDim, r.smem = q->sharedMem, r.args = q->args, r.stream = q->stream;
      r.resolved = true;
      return true;
    }
#endif
    default:
      return false;
  }
}

thread_local RuntimeLaunch t_unresolved;  // a runtime launch whose kernel handle we lack
thread_local bool t_has_unresolved = false;

void on_runtime(CUpti_CallbackId cbid, const CUpti_CallbackData* d) {
  if (d->callbackSite == CUPTI_API_EXIT) {
    if (!t_claimed && t_has_unresolved) {
      // Neither this callback nor a driver one could read the parameters (a static cudart that
      // hides cudaGetFuncBySymbol, and no driver callback): the launch is still counted and shown.
      RuntimeLaunch& r = t_unresolved;
      r.callee.name = d->symbolName;  // the entry callback's data is gone by now
      unsigned grid[3] = {r.grid.x, r.grid.y, r.grid.z}, block[3] = {r.block.x, r.block.y, r.block.z};
      if (begin(t_runtime, r.api, r.callee, grid, block, r.smem, nullptr))
        t_runtime.note = "parameters not readable: the runtime's kernel handle was not available";
    }
    leave(t_runtime);
    t_in_runtime = false;
    t_has_unresolved = false;
    return;
  }
  t_in_runtime = true;
  t_claimed = false;
  t_has_unresolved = false;
  RuntimeLaunch r;
  r.callee.name = d->symbolName;
  if (d->functionParams == nullptr || !runtime_launch(cbid, d->functionParams, r)) return;
  if (!r.resolved) {
    r.callee.function = nullptr;
    t_unresolved = r;
    t_has_unresolved = true;
    return;
  }
  t_claimed = true;
  unsigned grid[3] = {r.grid.x, r.grid.y, r.grid.z}, block[3] = {r.block.x, r.block.y, r.block.z};
  auto s = reinterpret_cast<CUstream>(r.stream);
  if (begin(t_runtime, r.api, r.callee, grid, block, r.smem, s)) enter(t_runtime, r.callee, r.args, nullptr, s);
}

void on_driver(CUpti_CallbackId cbid, const CUpti_CallbackData* d) {
  if (d->callbackSite == CUPTI_API_EXIT) {
    leave(t_driver);
    return;
  }
  if (t_in_runtime && t_claimed) return;  // the runtime callback has it
  const void* fp = d->functionParams;
  if (fp == nullptr) return;
  Callee c;
  c.name = d->symbolName;
  unsigned grid[3], block[3];
  size_t smem = 0;
  CUstream stream = nullptr;
  void **args = nullptr, **extra = nullptr;
  const char* api = "";
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz: {
      auto* q = static_cast<const cuLaunchKernel_params*>(fp);
      c.function = q->f;
      grid[0] = q->gridDimX, grid[1] = q->gridDimY, grid[2] = q->gridDimZ;
      block[0] = q->blockDimX, block[1] = q->blockDimY, block[2] = q->blockDimZ;
      smem = q->sharedMemBytes, stream = q->hStream, args = q->kernelParams, extra = q->extra;
      api = "cuLaunchKernel";
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz: {
      auto* q = static_cast<const cuLaunchKernelEx_params*>(fp);
      if (q->config == nullptr) return;
      c.function = q->f;
      grid[0] = q->config->gridDimX, grid[1] = q->config->gridDimY, grid[2] = q->config->gridDimZ;
      block[0] = q->config->blockDimX, block[1] = q->config->blockDimY, block[2] = q->config->blockDimZ;
      smem = q->config->sharedMemBytes, stream = q->config->hStream, args = q->kernelParams, extra = q->extra;
      api = "cuLaunchKernelEx";
      break;
    }
    default:
      return;
  }
  if (t_in_runtime) t_claimed = true;
  if (begin(t_driver, api, c, grid, block, smem, stream)) enter(t_driver, c, args, extra, stream);
}

void CUPTIAPI callback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
  if (t_busy) return;
  t_busy = true;
  const auto* d = static_cast<const CUpti_CallbackData*>(data);
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) on_runtime(cbid, d);
  if (domain == CUPTI_CB_DOMAIN_DRIVER_API) on_driver(cbid, d);
  t_busy = false;
}

// ------------------------------------------------------------------------------------------ times

// One kernel's GPU time, from CUPTI's kernel activity records (start and end stamped by the GPU).
struct KernelTime {
  long long launches = 0;
  unsigned long long ns = 0;
  std::set<uint32_t> streams;
  std::map<std::string, std::pair<long long, unsigned long long>> shapes;  // "grid/block" -> (n, ns)
};

#if CUPTI_API_VERSION >= 130000
using KernelRecord = CUpti_ActivityKernel10;
#else
using KernelRecord = CUpti_ActivityKernel9;
#endif

bool g_timing = false;
std::mutex g_times_mutex;
std::map<std::string, KernelTime> g_times;  // demangled name -> its launches' time
unsigned long long g_first_start = ~0ull, g_last_end = 0;
constexpr size_t kActivityBuffer = 8u << 20;

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(aligned_alloc(8, kActivityBuffer));
  *size = *buffer ? kActivityBuffer : 0;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* rec = nullptr;
  {
    std::lock_guard<std::mutex> lock(g_times_mutex);
    while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
      if (rec->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && rec->kind != CUPTI_ACTIVITY_KIND_KERNEL) continue;
      const auto* k = reinterpret_cast<const KernelRecord*>(rec);
      if (k->end <= k->start) continue;
      std::string name = demangle(k->name);
      if (g_set.has_regex && !std::regex_search(name, g_set.kernel)) continue;
      unsigned long long ns = k->end - k->start;
      KernelTime& t = g_times[name];
      t.launches += 1;
      t.ns += ns;
      t.streams.insert(k->streamId);
      char shape[96];
      snprintf(shape, sizeof shape, "%d,%d,%d/%d,%d,%d", k->gridX, k->gridY, k->gridZ, k->blockX, k->blockY,
               k->blockZ);
      auto& s = t.shapes[shape];
      s.first += 1;
      s.second += ns;
      if (k->start < g_first_start) g_first_start = k->start;
      if (k->end > g_last_end) g_last_end = k->end;
    }
  }
  free(buffer);
}

bool start_timing() {
  if (cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed) != CUPTI_SUCCESS) return false;
  return cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) == CUPTI_SUCCESS;
}

void times_json(std::string& o) {
  std::lock_guard<std::mutex> lock(g_times_mutex);
  o += ",\"times\":{";
  bool first = true;
  for (auto& kv : g_times) {
    if (!first) o += ',';
    first = false;
    json_string(o, kv.first);
    o += ":{\"launches\":" + std::to_string(kv.second.launches) + ",\"ns\":" + std::to_string(kv.second.ns) +
         ",\"streams\":" + std::to_string(kv.second.streams.size()) + ",\"shapes\":{";
    bool first_shape = true;
    for (auto& s : kv.second.shapes) {
      if (!first_shape) o += ',';
      first_shape = false;
      json_string(o, s.first);
      o += ":[" + std::to_string(s.second.first) + "," + std::to_string(s.second.second) + "]";
    }
    o += "}}";
  }
  o += "},\"span_ns\":" + std::to_string(g_last_end > g_first_start ? g_last_end - g_first_start : 0);
}

void write_summary() {
  if (g_timing) cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);  // outside g_mutex: it calls back
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!g_out) return;
  std::string o = "{\"event\":\"summary\",\"matching\":" + std::to_string(g_matching) +
                  ",\"recorded\":" + std::to_string(g_recorded) + ",\"kernels\":{";
  bool first = true;
  for (auto& kv : g_counts) {
    if (!first) o += ',';
    first = false;
    json_string(o, kv.first);
    o += ':' + std::to_string(kv.second);
  }
  o += "}";
  if (g_timing) times_json(o);
  o += "}\n";
  fputs(o.c_str(), g_out);
  fclose(g_out);
  g_out = nullptr;
}

void fail(const char* why) {
  if (g_out) {
    std::string o = "{\"event\":\"error\",\"message\":";
    json_string(o, why);
    o += "}\n";
    fputs(o.c_str(), g_out);
    fflush(g_out);
  }
}

}  // namespace

extern "C" int InitializeInjection(void) {
  const char* out = getenv("CUDA_AGENT_CAPTURE_OUT");
  if (out == nullptr || *out == '\0') return 0;
  g_set.out = out;
  g_out = fopen(out, "a");
  if (g_out == nullptr) return 0;
  if (const char* re = getenv("CUDA_AGENT_CAPTURE_KERNEL"); re && *re) {
    try {
      g_set.kernel = std::regex(re, std::regex::ECMAScript);
      g_set.has_regex = true;
    } catch (const std::regex_error&) {
      fail("CUDA_AGENT_CAPTURE_KERNEL is not a valid regular expression");
      return 0;
    }
  }
  g_set.launch = env_int("CUDA_AGENT_CAPTURE_LAUNCH", -1);
  g_set.max = env_int("CUDA_AGENT_CAPTURE_MAX", 8);
  g_set.hash_cap = static_cast<unsigned long long>(env_int("CUDA_AGENT_CAPTURE_HASH_CAP", 1ll << 30));
  g_set.save_cap = static_cast<unsigned long long>(env_int("CUDA_AGENT_CAPTURE_SAVE_CAP", 256ll << 20));
  if (const char* dir = getenv("CUDA_AGENT_CAPTURE_SAVE"); dir && *dir) g_set.save_dir = dir;
  g_trust_internal = env_int("CUDA_AGENT_CAPTURE_INTERNAL", 1) != 0;
  if (!load_driver()) {
    fail("the CUDA driver's memory functions were not found");
    return 0;
  }
  CUpti_SubscriberHandle subscriber;
  if (cuptiSubscribe(&subscriber, reinterpret_cast<CUpti_CallbackFunc>(callback), nullptr) != CUPTI_SUCCESS) {
    fail("cuptiSubscribe failed (is another CUPTI tool, such as nsys or ncu, attached?)");
    return 0;
  }
  const CUpti_CallbackId runtime_ids[] = {
      CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060,
#if CUDA_VERSION >= 13000 && CUPTI_API_VERSION >= 130000
      CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000, CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000,
#endif
  };
  const CUpti_CallbackId driver_ids[] = {
      CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
      CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz};
  for (auto id : runtime_ids) cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_RUNTIME_API, id);
  for (auto id : driver_ids) cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API, id);
  if (env_int("CUDA_AGENT_CAPTURE_TIMES", 0) != 0) {
    g_timing = start_timing();
    if (!g_timing) fail("CUPTI's activity API could not be enabled: kernel times not recorded");
  }
  atexit(write_summary);
  return 1;
}
