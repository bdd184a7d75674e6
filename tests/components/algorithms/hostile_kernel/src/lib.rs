//! Test algorithm that attacks the host on purpose; the tile size picks
//! how (n_elem as the bench passes it: bytes / 2). `args[1]` is the rank.
//! * 4    → sleeps 1 ms (std::thread::sleep), then runs the hello ring;
//! * 8    → spins on `tl.now_ps` forever;
//! * 16   → spins on `tl.program_id` forever;
//! * 32   → floods `tl.log` forever;
//! * 64   → floods stdout forever;
//! * 128  → loads a shape whose byte count overflows 64 bits;
//! * 256  → sleeps past the simulated clock's horizon;
//! * 512  → rank 0 loads an unmapped address while its peers wait for it;
//! * 1024 → sleeps 10 us in a loop forever;
//! * 2048 → issues 20000 stores without waiting, then the hello ring;
//! * 4096 → hands `tl.submit` batches no SDK would write (a direction
//!   index past the list, a tensor id never made, an id past the limit)
//!   and panics with the host's answers, one per line;
//! * 8192 → the hello ring, then a receive on the same direction of a
//!   shape whose byte count overflows 64 bits;
//! * 16384 → hands `tl.submit-encoded` bytes no SDK would write (an
//!   unknown case after a good load, a call cut short, a dtype, an option
//!   flag and a varint out of range), then drops the tensor the good load
//!   made, and panics with the host's answers, one per line;
//! * otherwise behaves like hello_send.

use kernbench_guest::prelude::*;
use std::time::Duration;

pub struct Hostile;

fn hello<T: Tl>(tl: &T, t_ptr: u64, n: u32) {
    let t = tl.load(t_ptr, &[n], Dtype::F16);
    tl.send("E", &t);
    let r = tl.recv(Some("W"), &[n], Dtype::F16);
    tl.store(t_ptr, &r);
}

impl Algorithm for Hostile {
    fn kernel<T: Tl>(tl: &T, t_ptr: u64, args: &[i64]) {
        let n = args[0] as u32;
        let rank = args[1];
        match n {
            4 => {
                std::thread::sleep(Duration::from_millis(1));
                hello(tl, t_ptr, n);
            }
            8 => loop {
                std::hint::black_box(tl.now_ps());
            },
            16 => loop {
                std::hint::black_box(tl.program_id(0));
            },
            32 => loop {
                tl.log("flooding the log");
            },
            64 => loop {
                println!("flooding stdout with a line that is long enough to fill the cap sooner");
            },
            128 => {
                tl.load(t_ptr, &[1 << 31, 1 << 31, 2], Dtype::F16);
            }
            256 => std::thread::sleep(Duration::from_secs(u64::MAX / 4)),
            512 => {
                if rank == 0 {
                    tl.load(0x7000_0000_0000_0000, &[n], Dtype::F16);
                } else {
                    hello(tl, t_ptr, n);
                }
            }
            1024 => loop {
                std::thread::sleep(Duration::from_micros(10));
            },
            2048 => {
                let t = tl.load(t_ptr, &[n], Dtype::F16);
                for _ in 0..20_000 {
                    tl.store(t_ptr, &t);
                }
                hello(tl, t_ptr, n);
            }
            4096 => malformed_batches(t_ptr, n),
            16384 => malformed_encoded_batches(t_ptr, n),
            8192 => {
                hello(tl, t_ptr, n);
                tl.recv(Some("W"), &[1 << 31, 1 << 31, 2], Dtype::F16);
            }
            _ => hello(tl, t_ptr, n),
        }
    }

    fn kernel_args(_world_size: u32, n_elem: u64, _cube_w: u32, _cube_h: u32) -> Vec<i64> {
        vec![n_elem as i64]
    }
}

/// Batches with wrong names, straight through the raw bindings.
fn malformed_batches(t_ptr: u64, n: u32) {
    use kernbench_guest::__algorithm::kernbench::sim::{tl, types};
    use tl::BatchCall as C;
    let dirs = ["E".to_string()];
    let shapes = [vec![n]];
    let load = C::Load((t_ptr, 0, types::Dtype::F16, 0));
    let answers = [
        tl::submit(&dirs, &shapes, &[load, C::Send((5, 0))]),
        tl::submit(&dirs, &shapes, &[C::DropTensor(9)]),
        tl::submit(
            &dirs,
            &shapes,
            &[C::Load((t_ptr, 0, types::Dtype::F16, 70_000))],
        ),
        tl::submit(&dirs, &shapes, &[C::Load((t_ptr, 3, types::Dtype::F16, 1))]),
        tl::submit(&dirs, &shapes, &[C::Load((t_ptr, 0, types::Dtype::F16, 0))]),
    ];
    panic_with(answers, "batch answers");
}

/// Panic with the host's answers to a kernel's batches, one per line.
fn panic_with(
    answers: impl IntoIterator<
        Item = Result<(), kernbench_guest::__algorithm::kernbench::sim::tl::BatchError>,
    >,
    what: &str,
) -> ! {
    let lines: Vec<String> = answers
        .into_iter()
        .map(|a| match a {
            Ok(()) => "ok".to_string(),
            Err(e) => format!("call {}: {}", e.index, e.message),
        })
        .collect();
    panic!("{what}:\n{}", lines.join("\n"));
}

/// Encoded batches that cannot be read, straight through the raw
/// bindings (the layout is `tl.submit-encoded`'s in the WIT).
fn malformed_encoded_batches(t_ptr: u64, n: u32) {
    use kernbench_guest::__algorithm::kernbench::sim::tl;
    let dirs = ["E".to_string()];
    let shapes = [vec![n]];
    let mut load = vec![0u8]; // load(addr, shape 0, f16, out 0)
    let mut addr = t_ptr;
    while addr >= 0x80 {
        load.push(addr as u8 | 0x80);
        addr >>= 7;
    }
    load.extend([addr as u8, 0, 0, 0]);
    let answers = [
        tl::submit_encoded(&dirs, &shapes, &[load.as_slice(), &[99]].concat()),
        tl::submit_encoded(&dirs, &shapes, &[13]),
        tl::submit_encoded(&dirs, &shapes, &[0, 0, 0, 17, 1]),
        tl::submit_encoded(&dirs, &shapes, &[4, 2, 0, 0, 0, 1]),
        tl::submit_encoded(&dirs, &shapes, &[13, 0xff, 0xff, 0xff, 0xff, 0x7f]),
        // The first batch's load was made: its tensor 0 is live.
        tl::submit_encoded(&dirs, &shapes, &[13, 0]),
    ];
    panic_with(answers, "encoded batch answers");
}

kernbench_guest::export_algorithm!(Hostile);
