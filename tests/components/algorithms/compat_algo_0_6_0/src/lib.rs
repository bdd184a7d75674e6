//! Test algorithm built against the frozen `kernbench:sim@0.6.0`
//! (`wit/history/0.6.0`, the whole released WIT, no guest SDK): a
//! component distributed before the host moved on. The host must run it
//! unchanged (docs/components.md, "Compatibility"). A one-step exchange that
//! all-reduces two ranks: load, send east, receive from the west, add,
//! store.

wit_bindgen::generate!({
    path: "../../../../wit/history/0.6.0",
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
        tl::store(t_ptr, &tl::add(&mine, &theirs));
    }
    fn kernel_args(_world_size: u32, n_elem: u64, _cube_w: u32, _cube_h: u32) -> Vec<i64> {
        vec![n_elem as i64]
    }
}

export!(Compat);
