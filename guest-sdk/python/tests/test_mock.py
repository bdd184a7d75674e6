"""The Python SDK's contract and mock, natively (python -m unittest)."""

import sys
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path[:0] = [
    str(ROOT / "guest-sdk" / "python"),
    str(ROOT / "algorithms" / "python" / "ring_allreduce"),
    str(ROOT / "algorithms" / "python" / "hello_send"),
]

import hello_send  # noqa: E402
import ring_allreduce  # noqa: E402
from kernbench import DPPolicy, contract  # noqa: E402
from kernbench.mock import decode, encode, rows, run_kernel_in_mock  # noqa: E402


class Ring(unittest.TestCase):
    def test_every_rank_gets_the_sum(self):
        for ws in (1, 2, 3, 4, 8):
            n = 16
            inputs = [[(r * 7 + i % 5) for i in range(n)] for r in range(ws)]
            want = [sum(v[i] for v in inputs) for i in range(n)]
            args = contract.call_kernel_args(ring_allreduce.kernel_args, ws, n, 1, 1, {})
            out = run_kernel_in_mock(ring_allreduce.kernel, ws, "ring_1d", inputs, args)
            self.assertEqual(out, [want] * ws, ws)

    def test_chunks_sum_every_element(self):
        for n, chunk in ((16, 5), (7, 1), (9, 100)):
            args = contract.call_kernel_args(
                ring_allreduce.kernel_args, 3, n, 1, 1, {"chunk_size": chunk}
            )
            inputs = [[r + 1] * n for r in range(3)]
            out = run_kernel_in_mock(ring_allreduce.kernel, 3, "ring_1d", inputs, args)
            self.assertEqual(out, [[6.0] * n] * 3)

    def test_an_unknown_parameter_is_named(self):
        with self.assertRaises(contract.ParameterError) as e:
            contract.call_kernel_args(ring_allreduce.kernel_args, 3, 8, 1, 1, {"kernel_x": 1})
        self.assertEqual(
            str(e.exception), "unknown parameter kernel_x (this algorithm takes chunk_size)"
        )


class Hello(unittest.TestCase):
    def test_rank_r_gets_rank_r_minus_1(self):
        # seed 003 §1 step 4, as written there.
        n = 8
        inputs = [[float(r + 1)] * n for r in range(4)]
        out = run_kernel_in_mock(
            hello_send.kernel, 4, "ring_1d", inputs, hello_send.kernel_args(4, n)
        )
        for r in range(4):
            self.assertEqual(out[r], inputs[(r - 1) % 4])


class Neighbors(unittest.TestCase):
    def test_pattern_b_replaces_the_row(self):
        class Skip:
            @staticmethod
            def neighbors(rank, world_size, neighbor_map):
                return {"E": (rank + 2) % world_size}

        self.assertEqual(rows(Skip, "ring_1d_unidir", 5, 4), [("E", 1, "W")])

    def test_pattern_a_and_c(self):
        class DropW:
            @staticmethod
            def neighbors(rank, world_size, neighbor_map):
                if rank % 2 == 1:
                    neighbor_map.pop("W", None)
                return neighbor_map

        self.assertEqual(rows(DropW, "ring_1d", 4, 1), [("E", 2, "W")])
        self.assertEqual(rows(DropW, "ring_1d", 4, 0), [("E", 1, "W"), ("W", 3, "E")])
        self.assertEqual(rows(None, "ring_1d", 4, 0), [("E", 1, "W"), ("W", 3, "E")])


class Placement(unittest.TestCase):
    def test_the_seeds_breaking_api_rules_hold(self):
        with self.assertRaises(TypeError):
            DPPolicy(sip="replicate")
        with self.assertRaises(TypeError):
            DPPolicy(num_sips=2)
        with self.assertRaises(ValueError):
            DPPolicy(cube="diagonal")
        self.assertEqual(DPPolicy("row_wise", num_cubes=4).num_cubes, 4)


class Dtypes(unittest.TestCase):
    def test_round_trips(self):
        for d in ("f16", "bf16", "f32", "i32"):
            self.assertEqual(decode(encode([1, -2, 3], d), d), [1.0, -2.0, 3.0], d)



class RecvAsync(unittest.TestCase):
    def test_futures_and_receives_take_messages_in_issue_order(self):
        def kernel(t_ptr, n, tl):
            mine = tl.load(t_ptr, shape=(n,), dtype="f16")
            tl.send(dir="E", src=mine)
            tl.send(dir="E", src=mine + mine)
            f = tl.recv_async(dir="W", shape=(n,), dtype="f16")
            second = tl.recv(dir="W", shape=(n,), dtype="f16")
            first = tl.wait(f)
            tl.store(t_ptr, first + first + second)

        out = run_kernel_in_mock(kernel, 2, "ring_1d", [[1.0] * 2, [2.0] * 2], (2,))
        self.assertEqual(out, [[8.0] * 2, [4.0] * 2])

    def test_a_future_never_waited_for_fails_the_kernel(self):
        def kernel(t_ptr, n, tl):
            tl.recv_async(dir="W", shape=(n,), dtype="f16")

        with self.assertRaisesRegex(RuntimeError, "without waiting for 1 recv_async"):
            run_kernel_in_mock(kernel, 1, "ring_1d", [[1.0]], (1,))


class SendFromAddress(unittest.TestCase):
    def test_the_raw_address_form_sends_memory_and_checks_nbytes(self):
        def kernel(t_ptr, n, tl):
            tl.send(dir="E", src_addr=t_ptr, nbytes=n * 2, shape=(n,), dtype="f16", space="hbm")
            tl.store(t_ptr, tl.recv(dir="W", shape=(n,), dtype="f16"))

        out = run_kernel_in_mock(kernel, 2, "ring_1d", [[1.0] * 2, [2.0] * 2], (2,))
        self.assertEqual(out, [[2.0] * 2, [1.0] * 2])

        def bad(t_ptr, n, tl):
            tl.send(dir="E", src_addr=t_ptr, nbytes=3, shape=(n,), dtype="f16")

        with self.assertRaisesRegex(RuntimeError, "nbytes=3 but shape"):
            run_kernel_in_mock(bad, 1, "ring_1d", [[1.0] * 2], (2,))


class MathUnit(unittest.TestCase):
    def test_composites_fuse_their_epilogue(self):
        def kernel(t_ptr, n, tl):
            x = tl.load(t_ptr, shape=(2, 2), dtype="f16")      # [[1, -2], [3, 4]]
            bias = tl.load(t_ptr, shape=(2,), dtype="f16")     # [1, -2]
            y = tl.composite("gemm-bias-relu", x, x, bias)     # relu([[-5, -10], [15, 10]] + bias)
            tl.store(t_ptr, tl.composite("gemm-bias", x, x, y) if n else y)

        out = run_kernel_in_mock(kernel, 1, "ring_1d", [[1.0, -2.0, 3.0, 4.0]], (0,))
        self.assertEqual(out[0], [0.0, 0.0, 16.0, 8.0])
        with self.assertRaisesRegex(RuntimeError, "composite gemm-bias"):
            run_kernel_in_mock(kernel, 1, "ring_1d", [[1.0, -2.0, 3.0, 4.0]], (1,))

    def test_cast_reduce_unary_and_gemm(self):
        def kernel(t_ptr, n, tl):
            x = tl.load(t_ptr, shape=(2, 2), dtype="f16")
            sq = x @ x                                  # [[7, 10], [15, 22]]
            col = tl.sum(tl.cast(sq, "f32"), axis=0)    # [22, 32]
            neg = -tl.cast(col, "f16")
            tl.store(t_ptr, tl.cast(tl.reduce("min", tl.load(t_ptr, shape=(1, 4)), 0), "f16"))
            tl.store(t_ptr, tl.unary("abs", neg) / tl.unary("abs", neg))

        out = run_kernel_in_mock(kernel, 1, "ring_1d", [[1.0, 2.0, 3.0, 4.0]], (4,))
        self.assertEqual(out[0][:2], [1.0, 1.0])

    def test_fill_converts_its_value_as_cast_does(self):
        def kernel(t_ptr, n, tl):
            tl.store(t_ptr, tl.fill((2, 2), "f16", 2.5) + tl.load(t_ptr, shape=(2, 2)))
            tl.store(t_ptr + 8, tl.cast(tl.fill(4, "i8", 300), "f16"))

        out = run_kernel_in_mock(kernel, 1, "ring_1d", [[1.0, 2.0, 3.0, 4.0, 0, 0, 0, 0]], ())
        self.assertEqual(out[0], [3.5, 4.5, 5.5, 6.5, 127.0, 127.0, 127.0, 127.0])



class Slots(unittest.TestCase):
    """A received tensor holds its IPCQ slot until it is dropped."""

    def kernel(self, keep):
        def kernel(t_ptr, n, tl):
            mine = tl.load(t_ptr, shape=(n,), dtype="f16")
            kept = []
            total = mine
            for _ in range(3):
                tl.send(dir="E", src=mine)
                got = tl.recv(dir="W", shape=(n,), dtype="f16")
                total = total + got
                if keep:
                    kept.append(got)
                del got
            tl.store(t_ptr, total)

        return kernel

    def test_dropped_tensors_free_their_slot(self):
        out = run_kernel_in_mock(self.kernel(False), 2, "ring_1d", [[1.0], [2.0]], (1,), n_slots=1)
        self.assertEqual(out, [[7.0], [5.0]])

    def test_received_tensors_kept_alive_deadlock_as_in_the_simulator(self):
        import kernbench.mock as m

        saved, m.DEADLOCK_TIMEOUT = m.DEADLOCK_TIMEOUT, 0.5
        try:
            with self.assertRaisesRegex(RuntimeError, "waited 0.5 s for a free slot"):
                run_kernel_in_mock(self.kernel(True), 2, "ring_1d", [[1.0], [2.0]], (1,), n_slots=1)
        finally:
            m.DEADLOCK_TIMEOUT = saved

if __name__ == "__main__":
    unittest.main()
