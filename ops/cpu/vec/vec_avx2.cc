// ops/cpu/vec built for avx2 (compile flags in ops/CMakeLists.txt).
#define ORRERY_VEC_NS avx2
#define ORRERY_VEC_LANES 8
#define ORRERY_VEC_ISA ::orrery::ops::cpu::vec::Isa::kAvx2
#include "ops/cpu/vec/vec_impl.h"
