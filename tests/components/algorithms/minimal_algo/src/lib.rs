//! Test algorithm written without the guest SDK, as a component from
//! another toolchain would be: its own copy of (a subset of) the WIT, no
//! `topo-name-to-kind` export. A one-step exchange that all-reduces two
//! ranks: load, send east, receive from the west, add, store.

wit_bindgen::generate!({
    inline: r#"
        package kernbench:sim@0.1.0;
        interface types {
            enum dtype { f16, bf16, %f32, %i32 }
        }
        interface tl {
            use types.{dtype};
            resource tensor;
            load: func(addr: u64, shape: list<u32>, dtype: dtype) -> tensor;
            store: func(addr: u64, value: borrow<tensor>);
            send: func(dir: string, value: borrow<tensor>);
            recv: func(dir: option<string>, shape: list<u32>, dtype: dtype) -> tensor;
            add: func(a: borrow<tensor>, b: borrow<tensor>) -> tensor;
        }
        world algorithm {
            import tl;
            export kernel: func(t-ptr: u64, args: list<s64>);
            export kernel-args: func(world-size: u32, n-elem: u64, cube-w: u32, cube-h: u32) -> list<s64>;
        }
    "#,
});

use kernbench::sim::tl;
use kernbench::sim::types::Dtype;

struct Minimal;

impl Guest for Minimal {
    fn kernel(t_ptr: u64, args: Vec<i64>) {
        let n = args[0] as u32;
        // args[2] is the host-appended sip_topo_kind: 0 without the export.
        assert_eq!(args[2], 0, "sip_topo_kind without topo-name-to-kind");
        let mine = tl::load(t_ptr, &[n], Dtype::F16);
        tl::send("E", &mine);
        let theirs = tl::recv(Some("W"), &[n], Dtype::F16);
        tl::store(t_ptr, &tl::add(&mine, &theirs));
    }
    fn kernel_args(_world_size: u32, n_elem: u64, _cube_w: u32, _cube_h: u32) -> Vec<i64> {
        vec![n_elem as i64]
    }
}

export!(Minimal);
