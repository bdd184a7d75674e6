//! Components as things people keep and share: the precompiled cache,
//! `inspect`, the WIT compatibility contract, install and the OCI registry.

use crate::common;
use common::{fails, kb, ok};
use std::path::Path;

/// `kernbench-host` with its compiled-component cache in `dir`.
fn kb_cached(dir: &Path) -> std::process::Command {
    let mut c = kb();
    c.env("KERNBENCH_CACHE_DIR", dir)
        .env_remove("KERNBENCH_NO_CACHE");
    c
}

/// Run `ccl_hello`; its stderr at debug level (the cache's verdicts).
fn hello_log(dir: &Path) -> String {
    let out = kb_cached(dir)
        .env("KERNBENCH_LOG", "kernbench::runtime=debug")
        .args(["run", "ccl_hello"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stderr).unwrap()
}

#[test]
fn compiled_code_is_cached_checked_and_cleared() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("compiled");
    let first = hello_log(&cache);
    assert!(first.contains("compiled-code cache Miss"), "{first}");
    let show = ok(kb_cached(&cache).args(["cache", "show"]));
    assert!(show.contains(&cache.display().to_string()), "{show}");
    assert!(
        show.contains("2 entries"),
        "the bench and its algorithm: {show}"
    );
    let second = hello_log(&cache);
    assert!(!second.contains("cache Miss"), "{second}");
    assert_eq!(
        second.matches("compiled-code cache Hit").count(),
        2,
        "{second}"
    );

    // A corrupt entry is noticed, removed and rebuilt; the run succeeds.
    let entry = std::fs::read_dir(&cache)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "cwasm"))
        .unwrap();
    let len = std::fs::metadata(&entry).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&entry)
        .unwrap()
        .set_len(len / 2)
        .unwrap();
    let third = hello_log(&cache);
    assert!(
        third.contains("is corrupt or truncated") && third.contains("compiling again"),
        "{third}"
    );
    assert_eq!(
        third.matches("compiled-code cache Hit").count(),
        1,
        "{third}"
    );
    assert_eq!(
        std::fs::metadata(&entry).unwrap().len(),
        len,
        "rewritten whole"
    );

    let clear = ok(kb_cached(&cache).args(["cache", "clear"]));
    assert!(clear.contains("removed 2 compiled component(s)"), "{clear}");
    assert!(ok(kb_cached(&cache).args(["cache", "show"])).contains("0 entries"));
    // --no-cache writes nothing.
    ok(kb_cached(&cache).args(["run", "ccl_hello", "--no-cache"]));
    assert!(ok(kb_cached(&cache).args(["cache", "show"])).contains("0 entries"));
}

/// A ccl.yaml whose default algorithm is the component at `path`.
fn ccl_with(path: &str) -> kernbench::config::CclConfig {
    let text = format!(
        "defaults: {{algorithm: probe}}\nalgorithms:\n  probe: {{module: {path}, topology: ring_1d}}\n"
    );
    kernbench::config::CclConfig::from_yaml(&text, kernbench::config::Origin::Embedded("t"))
        .unwrap()
}

#[test]
fn guests_built_against_the_oldest_release_of_the_line_run_unchanged() {
    use common::{ccl, run, test_component, topo};
    // Benches built against the frozen kernbench:sim@0.6.0 (the oldest of
    // today's line) and @0.2.0 (served by an adapter), on the current
    // host, with the current algorithms: data checked by them.
    for bench in ["compat_bench_0_6_0", "compat_bench_0_2_0"] {
        for n in [2, 3, 4] {
            let res = run(test_component(bench), topo(n), ccl(), None, &[])
                .unwrap_or_else(|e| panic!("{bench} on {n} SIPs: {e}"));
            assert_eq!(res.rows.len(), 1, "{bench}, {n} SIPs");
            assert_eq!(res.rows[0].wrong, 0, "{bench}, {n} SIPs: {:?}", res.rows);
            assert!(res.rows[0].time_ps > 0);
        }
    }
    // Algorithms built against 0.6.0 and 0.4.0 (its 5-case `binop` served
    // by an adapter), driven by the current bench.
    for algo in ["compat_algo_0_6_0", "compat_algo_0_4_0"] {
        let res = run(
            "ccl_allreduce",
            topo(2),
            ccl_with(test_component(algo)),
            None,
            &["-b", "8", "-e", "4K", "-f", "8"],
        )
        .unwrap_or_else(|e| panic!("{algo}: {e}"));
        assert_eq!(res.rows.len(), 2 * 4, "{algo}");
        assert!(
            res.rows.iter().all(|r| r.wrong == 0),
            "{algo}: {:?}",
            res.rows
        );
    }
}

#[test]
fn a_guest_newer_than_the_host_is_refused_with_both_versions() {
    let e = common::run(
        "ccl_allreduce",
        common::topo(2),
        ccl_with(common::test_component("newer_wit")),
        None,
        &[],
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains(&format!(
            "built against kernbench:sim@0.8.9, newer than this host's {}",
            today()
        )) && e.contains("Upgrade kernbench-host"),
        "{e}"
    );
}

#[test]
fn a_bench_reads_torch_version() {
    let e = common::run(
        common::test_component("dist_probe"),
        common::topo(1),
        common::ccl(),
        None,
        &["version"],
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains(&format!(
            "version: kernbench {} ({})",
            env!("CARGO_PKG_VERSION"),
            today()
        )),
        "{e}"
    );
}

/// A real OCI registry (Debian's `docker-registry`, the CNCF distribution
/// server) on a loopback port, with its storage in a temporary directory;
/// stopped when dropped.
struct RegistryServer {
    child: std::process::Child,
    port: u16,
    dir: tempfile::TempDir,
}

impl RegistryServer {
    /// Start one; `htpasswd`: require these credentials.
    fn start(htpasswd: Option<(&str, &str)>) -> RegistryServer {
        let bin = ["/usr/bin/docker-registry", "/usr/local/bin/registry"]
            .into_iter()
            .find(|p| Path::new(p).is_file())
            .expect(
                "no OCI registry server: install Debian's docker-registry package \
                 (.ci/run does) to run the registry tests",
            );
        let dir = tempfile::tempdir().unwrap();
        let port = common::free_port();
        let auth = match htpasswd {
            Some((user, password)) => {
                let hash = bcrypt::hash(password, 4).unwrap();
                let file = dir.path().join("htpasswd");
                std::fs::write(&file, format!("{user}:{hash}\n")).unwrap();
                format!(
                    "auth:\n  htpasswd:\n    realm: kernbench-test\n    path: {}\n",
                    file.display()
                )
            }
            None => String::new(),
        };
        let config = dir.path().join("config.yml");
        std::fs::write(
            &config,
            format!(
                "version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\n\
                 storage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\n\
                 http:\n  addr: 127.0.0.1:{port}\n  secret: kernbench-test\n{auth}",
                dir.path().join("data").display()
            ),
        )
        .unwrap();
        let child = std::process::Command::new(bin)
            .args(["serve", config.to_str().unwrap()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start the registry");
        let server = RegistryServer { child, port, dir };
        // Ready when it answers /v2/ (200, or 401 with auth).
        for _ in 0..200 {
            if let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) {
                use std::io::{Read, Write};
                let _ = s.write_all(b"GET /v2/ HTTP/1.0\r\n\r\n");
                let mut head = [0u8; 12];
                if s.read_exact(&mut head).is_ok() && head.starts_with(b"HTTP/1.") {
                    return server;
                }
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        panic!("the registry on port {port} did not come up within 10 s");
    }

    fn at(&self, repo: &str) -> String {
        format!("localhost:{}/{repo}", self.port)
    }

    /// The file holding blob `digest` in the registry's storage.
    fn blob_file(&self, digest: &str) -> std::path::PathBuf {
        let hex = digest.strip_prefix("sha256:").unwrap();
        self.dir
            .path()
            .join("data/docker/registry/v2/blobs/sha256")
            .join(&hex[..2])
            .join(hex)
            .join("data")
    }
}

impl Drop for RegistryServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `kernbench-host` with its own components directory and cache, and no
/// Docker credentials but those given.
fn kb_home(home: &Path) -> std::process::Command {
    let mut c = kb();
    c.env("KERNBENCH_DATA_DIR", home.join("data"))
        .env("KERNBENCH_CACHE_DIR", home.join("cache"))
        .env("DOCKER_CONFIG", home.join("docker"))
        .env("KERNBENCH_REGISTRY_TIMEOUT", "20");
    c
}

fn builtin_path(name: &str) -> &'static str {
    use kernbench::runtime::loader::ComponentKind;
    kernbench::runtime::Loader::builtins(ComponentKind::Algorithm)
        .chain(kernbench::runtime::Loader::builtins(ComponentKind::Bench))
        .find(|b| b.name == name)
        .unwrap()
        .path
}

/// The `manifest sha256:...` digest a publish printed.
fn manifest_digest(publish_out: &str) -> String {
    common::word_after(publish_out, "manifest")
}

#[test]
fn publish_pull_install_and_run_by_name_through_a_real_registry() {
    let reg = RegistryServer::start(None);
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let ring = builtin_path("ring_allreduce");
    let hello = builtin_path("ccl_hello");

    let out = ok(kb_home(h).args(["publish", ring, &reg.at("kb/ring_allreduce:1.0")]));
    assert!(out.contains("published ring_allreduce"), "{out}");
    let digest = manifest_digest(&out);
    ok(kb_home(h).args(["publish", hello, &reg.at("kb/hello:1.0")]));

    // By tag and by digest: the same bytes as published.
    let by_tag = h.join("by_tag.wasm");
    ok(kb_home(h).args([
        "pull",
        &reg.at("kb/ring_allreduce:1.0"),
        "-o",
        by_tag.to_str().unwrap(),
    ]));
    assert_eq!(
        std::fs::read(&by_tag).unwrap(),
        std::fs::read(ring).unwrap()
    );
    let by_digest = h.join("by_digest.wasm");
    let pinned = format!("{}@{digest}", reg.at("kb/ring_allreduce"));
    let out = ok(kb_home(h).args(["pull", &pinned, "-o", by_digest.to_str().unwrap()]));
    assert!(out.contains(&digest), "{out}");
    assert_eq!(
        std::fs::read(&by_digest).unwrap(),
        std::fs::read(ring).unwrap()
    );

    // The artifact is the ecosystem's: an OCI manifest, a wasm config, one
    // application/wasm layer, the metadata as annotations.
    let manifest = http_get(
        reg.port,
        &format!("/v2/kb/ring_allreduce/manifests/{digest}"),
    );
    let m: serde_json::Value = serde_json::from_str(&manifest).unwrap();
    assert_eq!(m["mediaType"], "application/vnd.oci.image.manifest.v1+json");
    assert_eq!(
        m["config"]["mediaType"],
        "application/vnd.wasm.config.v0+json"
    );
    assert_eq!(m["layers"][0]["mediaType"], "application/wasm");
    assert_eq!(m["layers"].as_array().unwrap().len(), 1);
    let a = &m["annotations"];
    assert_eq!(a["org.opencontainers.image.title"], "ring_allreduce");
    assert_eq!(a["org.opencontainers.image.licenses"], "Apache-2.0");
    assert_eq!(a["dev.kernbench.kind"], "algorithm");
    assert_eq!(a["dev.kernbench.wit"], today());
    assert_eq!(a["dev.kernbench.collectives"], "all_reduce");

    // inspect reads a reference without installing it.
    let out = ok(kb_home(h).args(["inspect", &reg.at("kb/ring_allreduce:1.0")]));
    assert!(
        out.contains("collectives   all_reduce") && out.contains("runs here"),
        "{out}"
    );

    // Install under new names, then run by those names: the bench from
    // the command line, the algorithm from a ccl.yaml `module:`.
    let out = ok(kb_home(h).args(["install", &reg.at("kb/hello:1.0"), "--name", "my_hello"]));
    assert!(out.contains("installed bench my_hello"), "{out}");
    ok(kb_home(h).args(["install", &pinned, "--name", "my_ring"]));
    let again = ok(kb_home(h).args(["install", &pinned, "--name", "my_ring"]));
    assert!(again.contains("already installed (same digest)"), "{again}");
    let list = ok(kb_home(h).args(["list", "--installed"]));
    assert!(
        list.contains("my_hello") && list.contains("my_ring") && list.contains(&digest),
        "{list}"
    );
    let hello_out = ok(kb_home(h).args(["run", "my_hello"]));
    assert!(
        hello_out.contains("Out of bounds values : 0 OK"),
        "{hello_out}"
    );
    let ccl = h.join("ccl.yaml");
    std::fs::write(
        &ccl,
        "defaults: {algorithm: mine}\nalgorithms:\n  mine: {module: my_ring, topology: ring_1d}\n",
    )
    .unwrap();
    let out = ok(kb_home(h).args([
        "run",
        "ccl_allreduce",
        "--ccl",
        ccl.to_str().unwrap(),
        "--format",
        "json",
        "--",
        "-b",
        "1K",
        "-e",
        "1K",
    ]));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["wrong_total"], 0, "{out}");

    // A damaged install is refused by name, not run.
    let installed = h.join("data/components/algorithms/my_ring.wasm");
    let mut bytes = std::fs::read(&installed).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x55;
    std::fs::write(&installed, &bytes).unwrap();
    let e =
        common::fails(kb_home(h).args(["run", "ccl_allreduce", "--ccl", ccl.to_str().unwrap()]));
    assert!(
        e.contains("does not match the digest recorded when it was installed"),
        "{e}"
    );

    let out = ok(kb_home(h).args(["remove", "my_ring"]));
    assert!(out.contains("removed algorithm my_ring"), "{out}");
    let e = common::fails(kb_home(h).args(["remove", "my_ring"]));
    assert!(e.contains("no installed component named 'my_ring'"), "{e}");
}

#[test]
fn wrong_digests_tampered_and_truncated_artifacts_are_refused() {
    let reg = RegistryServer::start(None);
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let ring = builtin_path("ring_allreduce");
    ok(kb_home(h).args(["publish", ring, &reg.at("kb/ring:1")]));
    let out_file = h.join("x.wasm");
    let pull =
        |r: &str| common::fails(kb_home(h).args(["pull", r, "-o", out_file.to_str().unwrap()]));

    // A digest the registry does not have.
    let zero = format!("{}@sha256:{}", reg.at("kb/ring"), "0".repeat(64));
    let e = pull(&zero);
    assert!(e.contains("pulling the manifest failed"), "{e}");

    // The layer's bytes changed in the registry's storage.
    let layer = {
        let m = http_get(reg.port, "/v2/kb/ring/manifests/1");
        let m: serde_json::Value = serde_json::from_str(&m).unwrap();
        m["layers"][0]["digest"].as_str().unwrap().to_string()
    };
    let blob = reg.blob_file(&layer);
    let good = std::fs::read(&blob).unwrap();
    let mut bad = good.clone();
    bad[100] ^= 0xff;
    std::fs::write(&blob, &bad).unwrap();
    let e = pull(&reg.at("kb/ring:1"));
    assert!(
        e.contains("refused, the artifact does not check out"),
        "{e}"
    );
    // Truncated.
    std::fs::write(&blob, &good[..good.len() / 3]).unwrap();
    let e = pull(&reg.at("kb/ring:1"));
    assert!(
        e.contains("refused, the artifact does not check out"),
        "{e}"
    );
    assert!(!out_file.exists(), "nothing written from a refused pull");
    // Nor installed.
    let e = common::fails(kb_home(h).args(["install", &reg.at("kb/ring:1")]));
    assert!(e.contains("does not check out"), "{e}");
    assert!(ok(kb_home(h).args(["list", "--installed"])).contains("(none"));
}

#[test]
fn an_unreachable_or_silent_registry_is_a_clear_bounded_error() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    // Nothing listens there.
    let closed = common::free_port();
    let e = common::fails(kb_home(h).args(["pull", &format!("localhost:{closed}/kb/x:1")]));
    assert!(
        e.contains(&format!("localhost:{closed}")) && e.contains("failed"),
        "{e}"
    );
    // Something accepts the connection and never answers.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let _hold = std::thread::spawn(move || {
        let mut held = Vec::new();
        for s in listener.incoming() {
            held.push(s);
        }
    });
    let e = common::fails(
        kb_home(h)
            .env("KERNBENCH_REGISTRY_TIMEOUT", "2")
            .args(["pull", &format!("127.0.0.1:{port}/kb/x:1")]),
    );
    assert!(
        e.contains(&format!("127.0.0.1:{port}"))
            && (e.contains("no answer within 2 s") || e.contains("timed out")),
        "{e}"
    );
}

#[test]
fn credentials_come_from_the_docker_config_and_are_never_printed() {
    let reg = RegistryServer::start(Some(("kb-user", "s3cret-Pa55")));
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let ring = builtin_path("ring_allreduce");
    // Without credentials: refused by the registry, said so.
    let out = kb_home(h)
        .args(["publish", ring, &reg.at("kb/ring:1")])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.contains("pushing failed"), "{e}");
    // With them in $DOCKER_CONFIG/config.json, as `docker login` writes.
    use base64::Engine as _;
    let auth = base64::engine::general_purpose::STANDARD.encode("kb-user:s3cret-Pa55");
    std::fs::create_dir_all(h.join("docker")).unwrap();
    std::fs::write(
        h.join("docker/config.json"),
        format!(
            "{{\"auths\": {{\"localhost:{}\": {{\"auth\": \"{auth}\"}}}}}}",
            reg.port
        ),
    )
    .unwrap();
    for args in [
        vec!["publish", ring, &reg.at("kb/ring:1")],
        vec![
            "pull",
            &reg.at("kb/ring:1"),
            "-o",
            h.join("r.wasm").to_str().unwrap(),
        ],
    ] {
        let out = kb_home(h)
            .env("KERNBENCH_LOG", "debug")
            .args(&args)
            .output()
            .unwrap();
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "{args:?}: {all}");
        assert!(
            !all.contains("s3cret-Pa55") && !all.contains(&auth),
            "a secret was printed: {all}"
        );
    }
}

/// GET a path of the registry; the body.
fn http_get(port: u16, path: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.0\r\nHost: localhost\r\nAccept: application/vnd.oci.image.manifest.v1+json\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    text.split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default()
}

#[test]
fn build_writes_metadata_from_the_project_manifest_and_inspect_shows_it() {
    // A JavaScript-style manifest is read for .js, pyproject for .py; C
    // has none: the name is the file's stem. Here C, the quickest to
    // build, with the metadata `inspect --json` must show.
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("my_hello.c");
    std::fs::copy(
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../algorithms/c/hello_send/hello_send.c"
        ),
        &src,
    )
    .unwrap();
    let out = dir.path().join("my_hello.wasm");
    ok(kb().args(["build", src.to_str().unwrap(), "-o", out.to_str().unwrap()]));
    let json = ok(kb_home(dir.path()).args(["inspect", out.to_str().unwrap(), "--json"]));
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["name"], "my_hello", "{json}");
    assert_eq!(v["kind"], "algorithm");
    assert_eq!(
        v["kernbench"]["sdk"],
        "kernbench C SDK (wit-bindgen-c, clang)"
    );
    assert_eq!(v["wit"][0], today());
    assert_eq!(v["accepted"], true);
    assert_eq!(v["capabilities"]["collectives"][0], "all_reduce");
    assert!(v["digest"].as_str().unwrap().starts_with("sha256:"));
    // The Rust SDK's come from Cargo.toml.
    let json = ok(kb_home(dir.path()).args(["inspect", "ring_allreduce", "--json"]));
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["metadata"]["licenses"], "Apache-2.0");
    assert_eq!(v["metadata"]["version"], env!("CARGO_PKG_VERSION"));
    assert!(v["metadata"]["description"]
        .as_str()
        .unwrap()
        .contains("Ring all-reduce"));
    assert_eq!(
        v["kernbench"]["sdk"],
        format!("kernbench-guest {} (Rust)", env!("CARGO_PKG_VERSION"))
    );
    assert!(
        v["producers"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == "Rust"),
        "{json}"
    );
    // A refused component says why.
    let json =
        ok(kb_home(dir.path()).args(["inspect", common::test_component("old_abi"), "--json"]));
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["accepted"], false);
    assert!(
        v["verdict"]
            .as_str()
            .unwrap()
            .contains("kernbench:sim@0.0.9"),
        "{json}"
    );
}

#[test]
fn names_resolve_path_then_components_dir_then_installed_then_built_in() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let found = |extra: &[&str], spec: &str| -> serde_json::Value {
        let mut c = kb_home(h);
        c.args(["inspect", spec, "--json"]).args(extra);
        serde_json::from_str(&ok(&mut c)).unwrap()
    };
    let digest_of = |p: &str| {
        let v: serde_json::Value =
            serde_json::from_str(&ok(kb_home(h).args(["inspect", p, "--json"]))).unwrap();
        v["digest"].as_str().unwrap().to_string()
    };
    // Built in.
    let v = found(&[], "ring_allreduce");
    assert!(
        v["found"].as_str().unwrap().starts_with("built into"),
        "{v}"
    );
    // An installed component of that name shadows the built-in one.
    let hello = builtin_path("hello_send");
    ok(kb_home(h).args(["install", hello, "--name", "ring_allreduce"]));
    let v = found(&[], "ring_allreduce");
    assert!(v["found"].as_str().unwrap().starts_with("installed"), "{v}");
    assert_eq!(v["digest"], digest_of(hello));
    // --components-dir (or its variable) comes before the installed ones.
    let dir = h.join("components");
    std::fs::create_dir_all(&dir).unwrap();
    let minimal = common::test_component("minimal_algo");
    std::fs::copy(minimal, dir.join("ring_allreduce.wasm")).unwrap();
    for v in [
        found(
            &["--components-dir", dir.to_str().unwrap()],
            "ring_allreduce",
        ),
        serde_json::from_str(&ok(kb_home(h)
            .env("KERNBENCH_COMPONENTS_DIR", &dir)
            .args(["inspect", "ring_allreduce", "--json"])))
        .unwrap(),
    ] {
        assert_eq!(
            v["found"],
            dir.join("ring_allreduce.wasm").display().to_string()
        );
        assert_eq!(v["digest"], digest_of(minimal));
    }
    // An explicit path wins over every name.
    let v = found(
        &["--components-dir", dir.to_str().unwrap()],
        builtin_path("ring_allreduce"),
    );
    assert_eq!(v["found"], builtin_path("ring_allreduce"));
    // Runs resolve the same way: the installed hello_send under the name
    // ring_allreduce is what ccl_allreduce's default entry now runs.
    let e = common::fails(kb_home(h).args(["run", "ccl_allreduce", "--", "-b", "64", "-e", "64"]));
    assert!(
        e.contains("differ") || e.contains("wrong") || e.contains("ring_allreduce"),
        "{e}"
    );
    ok(kb_home(h).args(["remove", "ring_allreduce"]));
    ok(kb_home(h).args(["run", "ccl_allreduce", "--", "-b", "64", "-e", "64"]));
}

/// Components of the first release, 0.1.0 (its 5-case
/// `binop`, `torch.zeros` without `dp`, `init-process-group` without
/// `options`) run, served by adapters (`runtime::shapes`): `inspect` says
/// so, the kernel's results are checked in step and recorded, and the
/// bench runs. They were refused with "expected enum of 6 names, found 5".
#[test]
fn the_first_release_s_components_run_with_their_results_checked() {
    let fixture = |f: &str| {
        common::guests::root()
            .join("tests/fixtures/compat")
            .join(f)
            .to_string_lossy()
            .into_owned()
    };
    let algo = fixture("r1_binary_algorithm.wasm");
    let said = ok(kb().arg("inspect").arg(&algo));
    assert!(
        said.contains(
            "runs here: built against kernbench:sim@0.4.0 or earlier (labelled 0.1.0 then; \
             `binop` without `div`)"
        ) && said.contains("serves by adapters"),
        "{said}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&ok(kb().arg("inspect").arg(&algo).arg("--json"))).unwrap();
    assert_eq!(json["accepted"], true);
    // Kernels recorded ahead of simulated time (the default), then in step.
    for (loader, how) in [
        (common::loader(), "recorded"),
        (common::in_step_loader(), "in step"),
    ] {
        let e = common::run_with(
            &loader,
            common::test_component("dist_probe"),
            common::topo(1),
            common::ccl(),
            None,
            &["double", &algo],
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("double wrong=0 time="), "{how}: {e}");
    }
    let out = ok(kb().arg("run").arg(fixture("r1_zeros_bench.wasm")));
    assert!(out.contains("Out of bounds values : 0 OK"), "{out}");
}

/// The ring all-reduce and the nccl-tests bench of every earlier state
/// of the interface — each state labelled 0.1.0 (0.1.0 to 0.6.0), then
/// the labels 0.1.1 and 0.1.2 —
/// built from the git history with the SDK of that commit
/// (tests/fixtures/compat/README.md), run on this host, paired with each
/// other and with today's, their data checked by the bench.
#[test]
fn the_components_of_every_earlier_release_run_with_their_data_checked() {
    use common::{ccl, run, topo};
    let fixture = |f: String| {
        common::guests::root()
            .join("tests/fixtures/compat")
            .join(f)
            .to_string_lossy()
            .into_owned()
    };
    let sweep = ["-b", "64", "-e", "4K", "-f", "8"];
    // A row per rank and size, every size of the sweep, no element wrong.
    let check = |rows: &[kernbench::runtime::session::ReportRecord], what: String| {
        let sizes: std::collections::BTreeSet<u64> = rows.iter().map(|r| r.size_bytes).collect();
        assert_eq!(sizes, [64, 512, 4096].into(), "{what}: {rows:?}");
        assert!(
            rows.iter().all(|r| r.wrong == 0 && r.time_ps > 0),
            "{what}: {rows:?}"
        );
    };
    for tag in ["r1", "r2", "r3", "r4", "r5", "r6", "v011", "v012"] {
        let bench = fixture(format!("{tag}_ccl_allreduce.wasm"));
        let algo = fixture(format!("{tag}_ring_allreduce.wasm"));
        for (n, ccl_cfg, with) in [
            (2, ccl_with(&algo), "its own ring"),
            (4, ccl_with(&algo), "its own ring"),
            (3, ccl(), "today's algorithms"),
        ] {
            let res = run(&bench, topo(n), ccl_cfg, None, &sweep)
                .unwrap_or_else(|e| panic!("{tag} on {n} SIPs with {with}: {e}"));
            check(&res.rows, format!("{tag}, {n} SIPs, {with}"));
        }
        // The earlier ring under today's bench.
        let res = run("ccl_allreduce", topo(3), ccl_with(&algo), None, &sweep)
            .unwrap_or_else(|e| panic!("{tag}'s ring under today's bench: {e}"));
        check(&res.rows, format!("{tag}'s ring under today's bench"));
    }
}

/// An algorithm of the last release with the four-case dtype (0.6.5,
/// `algorithm-full`) runs each of its dtypes through the adapters of
/// every import that names one (single calls and a `submit` batch), its
/// data checked; a dtype it cannot name is refused before it runs, with
/// the dtypes it knows.
#[test]
fn a_guest_of_the_four_dtypes_runs_them_and_is_refused_the_others_by_name() {
    use common::{run, test_component, topo};
    let algo = test_component("compat_algo_0_6_5");
    for dtype in ["f16", "bf16", "f32", "i32"] {
        for n in [1, 2] {
            let res = run(
                "ccl_allreduce",
                topo(n),
                ccl_with(algo),
                None,
                &["-b", "8", "-e", "1K", "-f", "8", "-d", dtype],
            )
            .unwrap_or_else(|e| panic!("{dtype} on {n}: {e}"));
            let rows = kernbench::report::aggregate(&res.rows, None);
            assert_eq!(rows.len(), 3, "{dtype} on {n}: {rows:?}");
            for r in &rows {
                let ip = r.in_place.as_ref().expect("in place runs");
                assert_eq!(ip.wrong, Some(0), "{dtype} on {n}: {r:?}");
            }
        }
    }
    for dtype in ["int8", "double"] {
        let e = run(
            "ccl_allreduce",
            topo(2),
            ccl_with(algo),
            None,
            &["-b", "8", "-e", "8", "-d", dtype],
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains(
                "built against an earlier kernbench:sim, whose dtypes are f16, bf16, f32, i32 only"
            ) && e.contains(&today()),
            "{dtype}: {e}"
        );
    }
    // premul_sum came in 0.8.0: an older guest is refused it by name, and
    // the refusal names the algorithms that do it.
    let e = run(
        "ccl_allreduce",
        topo(2),
        ccl_with(algo),
        None,
        &["-b", "8", "-e", "8", "-o", "mulsum"],
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains(
            "built against an earlier kernbench:sim, whose ops are sum, prod, max, min, avg only, \
             so it cannot be asked for all_reduce (premul_sum, f16)"
        ) && e.contains("to run premul_sum"),
        "{e}"
    );
}

/// A bench of the last release with the four-case dtype (0.6.5) makes,
/// reads and reports tensors of those dtypes through the adapters of
/// `torch.zeros`, `tensor.dtype` and the three report rows.
#[test]
fn a_bench_of_the_four_dtypes_reports_through_every_row_kind() {
    use common::{ccl, run, test_component, topo};
    use kernbench::hw::dtype::Dtype;
    let res = run(
        test_component("compat_bench_0_6_5"),
        topo(2),
        ccl(),
        None,
        &[],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let kinds: Vec<(Dtype, u64, Option<u64>)> = res
        .rows
        .iter()
        .map(|r| (r.dtype, r.wrong, r.in_place.as_ref().and_then(|b| b.wrong)))
        .collect();
    assert_eq!(
        kinds,
        [(Dtype::F32, 0, Some(0)), (Dtype::Bf16, 0, Some(0))],
        "{:?}",
        res.rows
    );
    let k: Vec<(&str, &str)> = res
        .kernel_rows
        .iter()
        .map(|r| (r.name.as_str(), r.dtype))
        .collect();
    assert_eq!(k, [("probe", "i32")]);
}

/// A registry that streams an endless manifest: the pull stops once the
/// process has grown past KERNBENCH_REGISTRY_MAX_MIB (it buffered 13 GB
/// in 40 s before the timeout).
#[test]
fn an_endless_manifest_is_cut_off_by_the_memory_bound() {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { return };
            // Each connection serves requests until the client closes it
            // (it may reuse one for the manifest after a probe).
            std::thread::spawn(move || loop {
                let mut req = Vec::new();
                let mut byte = [0u8; 1];
                while !req.ends_with(b"\r\n\r\n") {
                    match s.read(&mut byte) {
                        Ok(1) => req.push(byte[0]),
                        _ => return,
                    }
                }
                let req = String::from_utf8_lossy(&req).to_string();
                if !req.contains("/manifests/") {
                    if s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
                        .is_err()
                    {
                        return;
                    }
                    continue;
                }
                let _ = s.write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/vnd.oci.image.manifest.v1+json\r\n\
                      Transfer-Encoding: chunked\r\n\r\n",
                );
                let chunk = vec![b' '; 1 << 20];
                let mut framed = format!("{:x}\r\n", chunk.len()).into_bytes();
                framed.extend_from_slice(&chunk);
                framed.extend_from_slice(b"\r\n");
                while s.write_all(&framed).is_ok() {}
                return;
            });
        }
    });
    let started = std::time::Instant::now();
    let e = fails(
        kb().env("KERNBENCH_REGISTRY_MAX_MIB", "64")
            .env("KERNBENCH_REGISTRY_TIMEOUT", "60")
            .args([
                "pull",
                &format!("127.0.0.1:{port}/endless:1"),
                "-o",
                "/tmp/kb-never.wasm",
            ]),
    );
    assert!(
        e.contains("the answer took more than 64 MiB of memory"),
        "{e}"
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(30));
}

/// This host's interface, as components name it: `kernbench:sim@X.Y.Z`.
fn today() -> String {
    format!(
        "kernbench:sim@{}",
        kernbench::components::compat::WIT_VERSION
    )
}
