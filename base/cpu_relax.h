// CpuRelax: one spin-wait hint (x86 `pause`; nothing elsewhere). Costs a
// few dozen cycles and tells the core a spin loop is running, so a
// sibling thread and the memory system are not starved by it.
#pragma once

namespace orrery {

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

}  // namespace orrery
