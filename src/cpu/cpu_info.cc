#include "cpu/cpu_info.h"

#include <cpuid.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <set>
#include <string>
#include <utility>

namespace vellum::cpu {
namespace {

struct Regs {
  uint32_t eax = 0, ebx = 0, ecx = 0, edx = 0;
};

Regs cpuid(uint32_t leaf, uint32_t subleaf) {
  Regs r;
  __cpuid_count(leaf, subleaf, r.eax, r.ebx, r.ecx, r.edx);
  return r;
}

uint64_t xgetbv0() {
  uint32_t eax = 0, edx = 0;
  // xgetbv with ecx = 0 reads XCR0 (which register states the OS saves on context switch).
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (uint64_t{edx} << 32) | eax;
}

bool bit(uint32_t value, int index) { return ((value >> index) & 1u) != 0; }

// Linux >= 5.16 keeps AMX tile data disabled until the process asks for it.
bool request_amx_permission() {
  constexpr int kArchGetXcompPerm = 0x1022;
  constexpr int kArchReqXcompPerm = 0x1023;
  constexpr int kXfeatureXtiledata = 18;
  unsigned long bitmask = 0;
  if (syscall(SYS_arch_prctl, kArchGetXcompPerm, &bitmask) == 0 &&
      (bitmask & (1ul << kXfeatureXtiledata)) != 0) {
    return true;
  }
  if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) != 0) return false;
  bitmask = 0;
  return syscall(SYS_arch_prctl, kArchGetXcompPerm, &bitmask) == 0 &&
         (bitmask & (1ul << kXfeatureXtiledata)) != 0;
}

int read_int_file(const std::string& path, int fallback) {
  std::ifstream in(path);
  int value = fallback;
  if (!(in >> value)) return fallback;
  return value;
}

void count_cpus(CpuInfo& info) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) {
    const long n = sysconf(_SC_NPROCESSORS_ONLN);
    info.num_logical_cpus = n > 0 ? static_cast<int>(n) : 1;
    info.num_physical_cores = info.num_logical_cpus;
    return;
  }
  std::set<std::pair<int, int>> cores;  // (package id, core id)
  int num_logical = 0;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &set)) continue;
    ++num_logical;
    const std::string dir = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
    // Without sysfs every logical CPU counts as its own core.
    const int package = read_int_file(dir + "physical_package_id", 0);
    const int core = read_int_file(dir + "core_id", -1 - cpu);
    cores.emplace(package, core);
  }
  info.num_logical_cpus = num_logical > 0 ? num_logical : 1;
  info.num_physical_cores = cores.empty() ? info.num_logical_cpus : static_cast<int>(cores.size());
}

CpuInfo detect() {
  CpuInfo info;
  count_cpus(info);

  const uint32_t max_leaf = cpuid(0, 0).eax;
  if (max_leaf < 1) return info;
  const Regs leaf1 = cpuid(1, 0);
  const bool osxsave = bit(leaf1.ecx, 27);
  const uint64_t xcr0 = osxsave ? xgetbv0() : 0;
  const bool os_avx = (xcr0 & 0x6) == 0x6;              // SSE + AVX (YMM) state
  const bool os_avx512 = os_avx && (xcr0 & 0xe0) == 0xe0;  // opmask, ZMM_Hi256, Hi16_ZMM
  const bool os_amx = (xcr0 & (3ull << 17)) == (3ull << 17);  // XTILECFG + XTILEDATA

  const Regs leaf7 = max_leaf >= 7 ? cpuid(7, 0) : Regs{};
  const Regs leaf7_1 = (max_leaf >= 7 && leaf7.eax >= 1) ? cpuid(7, 1) : Regs{};

  info.fma = os_avx && bit(leaf1.ecx, 12);
  info.f16c = os_avx && bit(leaf1.ecx, 29);
  info.avx2 = os_avx && bit(leaf7.ebx, 5);
  info.avx512f = os_avx512 && bit(leaf7.ebx, 16);
  info.avx512dq = os_avx512 && bit(leaf7.ebx, 17);
  info.avx512bw = os_avx512 && bit(leaf7.ebx, 30);
  info.avx512vl = os_avx512 && bit(leaf7.ebx, 31);
  info.avx512_vnni = os_avx512 && bit(leaf7.ecx, 11);
  info.avx512_fp16 = os_avx512 && bit(leaf7.edx, 23);
  info.avx512_bf16 = os_avx512 && bit(leaf7_1.eax, 5);

  const bool cpu_amx_tile = bit(leaf7.edx, 24);
  if (cpu_amx_tile && os_amx) {
    if (request_amx_permission()) {
      info.amx_tile = true;
      info.amx_bf16 = bit(leaf7.edx, 22);
      info.amx_int8 = bit(leaf7.edx, 25);
    } else {
      info.amx_permission_denied = true;
    }
  }
  return info;
}

}  // namespace

const CpuInfo& cpu_info() {
  static const CpuInfo info = detect();
  return info;
}

int default_num_threads() { return cpu_info().num_physical_cores; }

}  // namespace vellum::cpu
