//! Test algorithm built against the frozen `kernbench:sim@0.4.0`
//! (`wit/history/0.4.0`, no guest SDK), whose `binop` has 5 cases (`div`
//! came in 0.5.0): the host serves it by an adapter under the exact name
//! `tl@0.4.0` (`runtime::shapes`). A one-step exchange that all-reduces
//! two ranks through `tl.binary(add)`.

wit_bindgen::generate!({
    path: "../../../../wit/history/0.4.0",
    world: "algorithm",
});

use kernbench::sim::tl;
use kernbench::sim::types::Dtype;

struct Compat;

impl Guest for Compat {
    fn kernel(t_ptr: u64, args: Vec<i64>) {
        let n = args[0] as u32;
        let mine = tl::load(t_ptr, &[n], Dtype::F16);
        tl::send("E", &mine);
        let theirs = tl::recv(Some("W"), &[n], Dtype::F16);
        tl::store(t_ptr, &tl::binary(tl::Binop::Add, &mine, &theirs));
    }
    fn kernel_args(_world_size: u32, n_elem: u64, _cube_w: u32, _cube_h: u32) -> Vec<i64> {
        vec![n_elem as i64]
    }
}

export!(Compat);
