/* The native mock's stand-in for `algorithm_outputs.h`, the header that
 * wit-bindgen generates for the WIT world `algorithm-outputs` when
 * `kernbench-host build` compiles a C algorithm for wasm32-wasi.
 *
 * kernbench.h needs only the two resource handle types below (the same
 * layout as wit-bindgen's: a struct holding an int32_t handle). Compile
 * natively with `-I <sdk>/mock -I <sdk>` so that kernbench.h's
 * `#include "algorithm_outputs.h"` finds this file; kernbench_mock.c then
 * implements the kb_* calls without any bindings (kernbench.c, which calls
 * them, is not compiled in mock mode). */
#ifndef ALGORITHM_OUTPUTS_H
#define ALGORITHM_OUTPUTS_H

#include <stdint.h>

/* An owned tensor: in the mock, an index (from 1) into the rank's table. */
typedef struct kernbench_sim_tl_own_tensor_t {
    int32_t __handle;
} kernbench_sim_tl_own_tensor_t;

/* An owned recv_async future: in the mock, an index (from 1) into the
 * rank's table of futures. */
typedef struct kernbench_sim_tl_own_recv_future_t {
    int32_t __handle;
} kernbench_sim_tl_own_recv_future_t;

#endif
