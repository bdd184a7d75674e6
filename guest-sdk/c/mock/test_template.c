/* A unit test of this project's all-reduce in the KernBench C SDK's native
 * mock (kernbench/mock/kernbench_mock.h): the kernel runs on 1 to 8 ranks
 * of a ring_1d, one thread each, in milliseconds, and every rank must end
 * holding the element-wise sum of every rank's f16 input (small integers:
 * exact in f16). Build and run it natively:
 *
 *   cc -std=c11 -O1 -Wall -Wextra -pthread -I kernbench/mock -I kernbench \
 *      NAME.c kernbench/mock/kernbench_mock.c test_NAME.c -o test_NAME && ./test_NAME
 *
 * It prints one line per case and `ok: N cases`, exit status 0; at the
 * first failing case, what differed, exit status 1. */
#include "kernbench.h"
#include "kernbench_mock.h"

#include <stdio.h>

#define MAX_RANKS 8
#define MAX_ELEM 16

int main(void) {
    static const uint32_t world_sizes[] = {1, 2, 3, 4, 5, 6, 7, 8};
    static const uint64_t lengths[] = {1, 5, MAX_ELEM};
    static double in[MAX_RANKS][MAX_ELEM], out[MAX_RANKS][MAX_ELEM];
    double *inputs[MAX_RANKS], *outputs[MAX_RANKS];
    int cases = 0;
    for (size_t w = 0; w < sizeof world_sizes / sizeof *world_sizes; w++) {
        for (size_t l = 0; l < sizeof lengths / sizeof *lengths; l++) {
            uint32_t ws = world_sizes[w];
            uint64_t n = lengths[l];
            double want[MAX_ELEM] = {0};
            for (uint32_t r = 0; r < ws; r++) {
                inputs[r] = in[r];
                outputs[r] = out[r];
                for (uint64_t i = 0; i < n; i++) {
                    in[r][i] = (double)(r * 7 + i % 5);
                    out[r][i] = -1;
                    want[i] += in[r][i];
                }
            }
            kb_mock_config cfg = {.world_size = ws, .n_elem = n, .dtype = KB_F16,
                                  .topology = "ring_1d"};
            char err[2048];
            printf("all_reduce f16 sum, ring_1d, %u rank(s), %llu element(s): ", (unsigned)ws,
                   (unsigned long long)n);
            if (kb_mock_run(&cfg, inputs, outputs, err, sizeof err) != 0) {
                printf("FAILED\n  %s\n", err);
                return 1;
            }
            int wrong = 0;
            for (uint32_t r = 0; r < ws; r++) {
                for (uint64_t i = 0; i < n; i++) {
                    if (out[r][i] == want[i]) continue;
                    if (wrong == 0) printf("FAILED\n");
                    if (wrong++ < 10)
                        printf("  rank %u element %llu: got %g, want %g\n", (unsigned)r,
                               (unsigned long long)i, out[r][i], want[i]);
                }
            }
            if (wrong) {
                printf("  (%d wrong element(s) in all)\n", wrong);
                return 1;
            }
            printf("ok\n");
            cases++;
        }
    }
    printf("ok: %d cases\n", cases);
    return 0;
}
