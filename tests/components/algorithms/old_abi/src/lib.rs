//! Test algorithm built against an older `kernbench:sim` package version
//! (0.0.9): the host must refuse it and name both versions.

wit_bindgen::generate!({
    inline: r#"
        package kernbench:sim@0.0.9;
        interface tl {
            program-id: func(axis: u32) -> s64;
        }
        world algorithm {
            import tl;
            export kernel: func(t-ptr: u64, args: list<s64>);
            export kernel-args: func(world-size: u32, n-elem: u64, cube-w: u32, cube-h: u32) -> list<s64>;
            export topo-name-to-kind: func(name: string) -> option<s32>;
        }
    "#,
});

struct Old;

impl Guest for Old {
    fn kernel(_t_ptr: u64, _args: Vec<i64>) {
        let _ = kernbench::sim::tl::program_id(0);
    }
    fn kernel_args(_world_size: u32, n_elem: u64, _cube_w: u32, _cube_h: u32) -> Vec<i64> {
        vec![n_elem as i64]
    }
    fn topo_name_to_kind(_name: String) -> Option<i32> {
        None
    }
}

export!(Old);
