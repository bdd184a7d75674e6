//! The compiled-component cache's loader on whatever a cache file holds:
//! the input is written as the entry of a small component, which is then
//! loaded. The loader must hit only on the one sound entry (what it wrote
//! itself for this component and engine), else reject the file, compile
//! again and leave a sound entry behind; never panic, and never run code
//! compiled from another component or damaged on disk.
#![no_main]

use kernbench::runtime::compile_cache::{CompileCache, Lookup};
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;
use wasmtime::component::Component;
use wasmtime::{Config, Engine};

struct Setup {
    engine: Engine,
    cache: CompileCache,
    wasm: Vec<u8>,
    sound: Vec<u8>,
    _dir: tempfile::TempDir,
}

const WAT: &str = r#"(component
  (core module $m (func (export "f") (result i32) i32.const 7))
  (core instance $i (instantiate $m))
  (func (export "f") (result s32) (canon lift (core func $i "f"))))"#;

fn setup() -> &'static Setup {
    static SETUP: OnceLock<Setup> = OnceLock::new();
    SETUP.get_or_init(|| {
        let mut config = Config::new();
        config.wasm_component_model(true);
        let engine = Engine::new(&config).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let cache = CompileCache::new(dir.path().to_path_buf(), 64 << 20);
        let wasm = wat::parse_str(WAT).unwrap();
        let (_, lookup) = cache
            .get_or_compile(&engine, &wasm, || Component::new(&engine, &wasm))
            .unwrap();
        assert_eq!(lookup, Lookup::Miss);
        let sound = std::fs::read(cache.path_for(&engine, &wasm)).unwrap();
        Setup {
            engine,
            cache,
            wasm,
            sound,
            _dir: dir,
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let s = setup();
    let path = s.cache.path_for(&s.engine, &s.wasm);
    std::fs::write(&path, data).unwrap();
    let (_, lookup) = s
        .cache
        .get_or_compile(&s.engine, &s.wasm, || Component::new(&s.engine, &s.wasm))
        .unwrap();
    match lookup {
        Lookup::Hit => assert_eq!(data, s.sound.as_slice(), "a hit on an unsound entry"),
        Lookup::Miss | Lookup::Rejected(_) => {
            assert_ne!(data, s.sound.as_slice(), "the sound entry was not used")
        }
    }
    let (_, again) = s
        .cache
        .get_or_compile(&s.engine, &s.wasm, || Component::new(&s.engine, &s.wasm))
        .unwrap();
    assert_eq!(again, Lookup::Hit, "no sound entry left behind");
});
