// ops/cpu/vec built for portable (compile flags in ops/CMakeLists.txt).
#define ORRERY_VEC_NS portable
#define ORRERY_VEC_LANES 4
#define ORRERY_VEC_ISA ::orrery::ops::cpu::vec::Isa::kPortable
#include "ops/cpu/vec/vec_impl.h"
