//! Test algorithm that misbehaves on purpose; the tile size picks how
//! (n_elem as the bench passes it: bytes / 2):
//! * 4  → sends to direction "N", which a ring does not install;
//! * 8  → the guest panics (a trap);
//! * 16 → loops forever (fuel must stop it);
//! * 32 → every rank receives and nobody sends (a deadlock);
//! * 64 → loads from an address outside every memory;
//! * 128 → allocates 1 GiB of guest memory (over the cap);
//! * 256 → recurses without end (stack overflow);
//! * 512 → adds two tensors of different shapes;
//! * 1024 → `kernel_args` panics (before any kernel runs);
//! * otherwise behaves like hello_send.

use kernbench_guest::prelude::*;

pub struct Faulty;

// Deliberately endless: the test checks that a stack overflow is a clean error.
#[allow(unconditional_recursion)]
fn recurse(x: u64) -> u64 {
    let pad = std::hint::black_box([x; 64]);
    recurse(pad[3] + 1) + pad[7]
}

impl Algorithm for Faulty {
    fn kernel<T: Tl>(tl: &T, t_ptr: u64, args: &[i64]) {
        let n = args[0] as u32;
        match n {
            4 => {
                let t = tl.load(t_ptr, &[n], Dtype::F16);
                tl.send("N", &t);
            }
            8 => panic!("deliberate failure in faulty_kernel"),
            16 => {
                let mut x: u64 = 1;
                loop {
                    x = std::hint::black_box(x.wrapping_mul(3));
                }
            }
            32 => {
                println!("about to wait for a message that never comes");
                let r = tl.recv(Some("W"), &[n], Dtype::F16);
                tl.store(t_ptr, &r);
            }
            64 => {
                tl.load(0x7000_0000_0000_0000, &[n], Dtype::F16);
            }
            128 => {
                let v = vec![1u8; 1 << 30];
                std::hint::black_box(&v);
            }
            256 => {
                std::hint::black_box(recurse(std::hint::black_box(1)));
            }
            512 => {
                let a = tl.load(t_ptr, &[n], Dtype::F16);
                let b = tl.load(t_ptr, &[n / 2], Dtype::F16);
                tl.add(&a, &b);
            }
            _ => {
                let t = tl.load(t_ptr, &[n], Dtype::F16);
                tl.send("E", &t);
                let r = tl.recv(Some("W"), &[n], Dtype::F16);
                tl.store(t_ptr, &r);
            }
        }
    }

    fn kernel_args(_world_size: u32, n_elem: u64, _cube_w: u32, _cube_h: u32) -> Vec<i64> {
        if n_elem == 1024 {
            panic!("deliberate failure in kernel_args");
        }
        vec![n_elem as i64]
    }
}

kernbench_guest::export_algorithm!(Faulty);
