// ops/cpu/vec built for avx512 (compile flags in ops/CMakeLists.txt).
#define ORRERY_VEC_NS avx512
#define ORRERY_VEC_LANES 16
#define ORRERY_VEC_ISA ::orrery::ops::cpu::vec::Isa::kAvx512
#include "ops/cpu/vec/vec_impl.h"
