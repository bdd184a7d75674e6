//! Test algorithm built against a `kernbench:sim` newer than the host's
//! (0.8.9, same line): the host must refuse it, name both versions and
//! say to upgrade.

wit_bindgen::generate!({
    inline: r#"
        package kernbench:sim@0.8.9;
        interface tl {
            program-id: func(axis: u32) -> s64;
        }
        world algorithm {
            import tl;
            export kernel: func(t-ptr: u64, args: list<s64>);
            export kernel-args: func(world-size: u32, n-elem: u64, cube-w: u32, cube-h: u32) -> list<s64>;
        }
    "#,
});

struct Newer;

impl Guest for Newer {
    fn kernel(_t_ptr: u64, _args: Vec<i64>) {
        let _ = kernbench::sim::tl::program_id(0);
    }
    fn kernel_args(_world_size: u32, n_elem: u64, _cube_w: u32, _cube_h: u32) -> Vec<i64> {
        vec![n_elem as i64]
    }
}

export!(Newer);
