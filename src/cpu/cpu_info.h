// What the processor and the operating system let Vellum use: CPUID feature bits checked against
// the XSAVE state the OS enables (XCR0), and the Linux AMX tile-data permission.
//
// cpu_info() is computed once (thread-safe) and never changes afterwards.
#pragma once

namespace vellum::cpu {

struct CpuInfo {
  // Each flag is true only when the CPU reports the feature AND the OS saves its register state
  // (for AMX: also granted the XTILEDATA permission to this process).
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512dq = false;
  bool avx512_bf16 = false;
  bool avx512_fp16 = false;
  bool avx512_vnni = false;
  bool amx_tile = false;
  bool amx_bf16 = false;
  bool amx_int8 = false;
  // True when the CPU has AMX but the kernel refused ARCH_REQ_XCOMP_PERM (old kernel, seccomp).
  bool amx_permission_denied = false;

  int num_logical_cpus = 1;   // CPUs in this process's affinity mask
  int num_physical_cores = 1; // distinct (package, core) pairs among those CPUs
};

// Detected on first call; later calls return the same object.
const CpuInfo& cpu_info();

// Physical cores available to the process (respects sched_getaffinity); at least 1.
int default_num_threads();

}  // namespace vellum::cpu
