//! Components in OCI registries, in the WebAssembly ecosystem's artifact
//! format (the CNCF wasm OCI artifact layout: an OCI image manifest whose
//! config is `application/vnd.wasm.config.v0+json` and whose one layer is
//! the component as `application/wasm`), through `oci-wasm`, the crate
//! `wkg` uses, so that `wkg oci pull` / `wkg oci push` and KernBench read
//! each other's artifacts.
//!
//! - Transport: HTTPS, except for loopback registries (`localhost`,
//!   `127.0.0.1`, `[::1]`) and those listed in
//!   `KERNBENCH_INSECURE_REGISTRIES` (comma-separated `host:port`), which
//!   use plain HTTP, as Docker treats them.
//! - Credentials: read as Docker reads them (`$DOCKER_CONFIG/config.json`
//!   or `~/.docker/config.json`: `auths`, identity tokens and credential
//!   helpers); anonymous when there are none. Never printed.
//! - Bounded waits: every operation gives up after
//!   `KERNBENCH_REGISTRY_TIMEOUT` seconds (default 60) with the registry's
//!   name in the message.
//! - Bounded memory: the layer is streamed into a buffer of at most its
//!   announced size, but oci-client reads a manifest whole; so every
//!   operation also stops once the process has grown by
//!   `KERNBENCH_REGISTRY_MAX_MIB` (default: a component's cap + 256 MiB)
//!   since it began, which an endless manifest reaches in a fraction of a
//!   second.
//! - Trust: a pulled manifest must have the digest asked for (pull by
//!   digest), exactly one `application/wasm` layer no larger than a
//!   component may be, a config listing that layer's digest; the layer's
//!   bytes must have that digest and size. Anything else is refused.

use super::metadata::ComponentInfo;
use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::manifest::OciDescriptor;
use oci_client::secrets::RegistryAuth;
use oci_client::Reference;
use oci_wasm::{WasmClient, WasmConfig, WASM_LAYER_MEDIA_TYPE};
use std::collections::BTreeMap;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use super::MAX_COMPONENT_BYTES;
const DEFAULT_TIMEOUT_SECS: u64 = 60;

/// Why a registry operation failed.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error(
        "'{reference}' is not an OCI reference ({message}); write registry/repository:tag or \
         registry/repository@sha256:<digest>, e.g. ghcr.io/me/ring_allreduce:1.0"
    )]
    BadReference { reference: String, message: String },
    #[error("{registry}: no answer within {secs} s (KERNBENCH_REGISTRY_TIMEOUT) while {doing}")]
    TimedOut {
        registry: String,
        secs: u64,
        doing: &'static str,
    },
    #[error("{registry}: {doing} failed: {message}")]
    Failed {
        registry: String,
        doing: &'static str,
        message: String,
    },
    #[error(
        "{reference}: refused, the artifact does not check out: {why} (tampered with, truncated \
         or not a wasm component artifact)"
    )]
    Untrusted { reference: String, why: String },
    #[error(
        "{registry}: stopped while {doing}: the answer took more than {mib} MiB of memory \
         (KERNBENCH_REGISTRY_MAX_MIB), more than any component artifact needs: a broken or \
         hostile registry"
    )]
    Oversized {
        registry: String,
        doing: &'static str,
        mib: u64,
    },
}

/// A component pushed.
#[derive(Debug, Clone)]
pub struct Pushed {
    pub reference: String,
    /// `sha256:...` of the manifest: pull `<repository>@<digest>` to get
    /// exactly these bytes.
    pub manifest_digest: String,
}

/// A component pulled and checked.
#[derive(Debug, Clone)]
pub struct Pulled {
    pub wasm: Vec<u8>,
    pub manifest_digest: String,
    /// `sha256:...` of the component (the layer).
    pub layer_digest: String,
    pub annotations: BTreeMap<String, String>,
}

/// Parse an OCI reference (an optional `oci://` prefix is dropped).
pub fn parse_reference(s: &str) -> Result<Reference, RegistryError> {
    let r = s.strip_prefix("oci://").unwrap_or(s);
    r.parse::<Reference>()
        .map_err(|e| RegistryError::BadReference {
            reference: s.to_string(),
            message: e.to_string(),
        })
}

/// Whether `spec` names a registry artifact rather than a file or a
/// component name: `oci://...`, or a first path segment that is a
/// registry host (has a '.' or a ':' port, or is `localhost`), as Docker
/// decides it.
pub fn looks_like_reference(spec: &str) -> bool {
    if spec.starts_with("oci://") {
        return true;
    }
    if spec.ends_with(".wasm") {
        return false;
    }
    match spec.split_once('/') {
        Some((host, rest)) => {
            !rest.is_empty()
                && !host.is_empty()
                && !host.starts_with('.')
                && (host.contains('.') || host.contains(':') || host == "localhost")
        }
        None => false,
    }
}

/// Registries spoken to over plain HTTP.
fn insecure_registries() -> Vec<String> {
    let mut v: Vec<String> = std::env::var("KERNBENCH_INSECURE_REGISTRIES")
        .unwrap_or_default()
        .split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect();
    v.extend(["localhost", "127.0.0.1", "[::1]"].map(String::from));
    v
}

fn is_insecure(registry: &str, list: &[String]) -> bool {
    let host = registry
        .rsplit_once(':')
        .filter(|(_, port)| port.chars().all(|c| c.is_ascii_digit()))
        .map_or(registry, |(h, _)| h);
    list.iter().any(|r| r == registry || r == host)
}

/// Credentials for `registry`, as Docker would use them.
fn auth_for(registry: &str) -> RegistryAuth {
    let key = if registry == "index.docker.io" || registry == "docker.io" {
        "https://index.docker.io/v1/"
    } else {
        registry
    };
    match docker_credential::get_credential(key) {
        Ok(docker_credential::DockerCredential::UsernamePassword(u, p)) => {
            RegistryAuth::Basic(u, p)
        }
        Ok(docker_credential::DockerCredential::IdentityToken(t)) => RegistryAuth::Bearer(t),
        Err(e) => {
            tracing::debug!("no registry credentials for {registry} ({e:?}); anonymous");
            RegistryAuth::Anonymous
        }
    }
}

/// A client for OCI registries.
pub struct Registry {
    rt: tokio::runtime::Runtime,
    timeout: Duration,
    /// How much the process may grow during one operation.
    max_growth: u64,
    insecure: Vec<String>,
}

impl Registry {
    pub fn new() -> Result<Self, RegistryError> {
        let secs = std::env::var("KERNBENCH_REGISTRY_TIMEOUT")
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
            .filter(|&s| s > 0)
            .unwrap_or(DEFAULT_TIMEOUT_SECS);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| RegistryError::Failed {
                registry: "(none)".into(),
                doing: "starting the network runtime",
                message: e.to_string(),
            })?;
        let max_mib = std::env::var("KERNBENCH_REGISTRY_MAX_MIB")
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
            .filter(|&m| m > 0)
            .unwrap_or((MAX_COMPONENT_BYTES >> 20) + 256);
        Ok(Registry {
            rt,
            timeout: Duration::from_secs(secs),
            max_growth: max_mib << 20,
            insecure: insecure_registries(),
        })
    }

    fn client(&self, registry: &str) -> WasmClient {
        let protocol = if is_insecure(registry, &self.insecure) {
            ClientProtocol::HttpsExcept(vec![registry.to_string()])
        } else {
            ClientProtocol::Https
        };
        WasmClient::new(oci_client::Client::new(ClientConfig {
            protocol,
            connect_timeout: Some(self.timeout),
            read_timeout: Some(self.timeout),
            user_agent: concat!("kernbench-host/", env!("CARGO_PKG_VERSION")),
            ..ClientConfig::default()
        }))
    }

    /// Run `fut` against `registry`, within the timeout and the memory
    /// growth allowed (the process's resident size, sampled every 20 ms).
    fn bounded<T>(
        &self,
        registry: &str,
        doing: &'static str,
        fut: impl std::future::Future<Output = anyhow::Result<T>>,
    ) -> Result<T, RegistryError> {
        let secs = self.timeout.as_secs();
        let resident = crate::budget::MemoryBudget::process_resident;
        let (start, max_growth) = (resident(), self.max_growth);
        let grown_too_much = async move {
            loop {
                tokio::time::sleep(Duration::from_millis(20)).await;
                if resident().saturating_sub(start) > max_growth {
                    return;
                }
            }
        };
        let outcome = self.rt.block_on(async {
            tokio::select! {
                r = tokio::time::timeout(self.timeout, fut) => Some(r),
                () = grown_too_much => None,
            }
        });
        let Some(outcome) = outcome else {
            return Err(RegistryError::Oversized {
                registry: registry.to_string(),
                doing,
                mib: max_growth >> 20,
            });
        };
        outcome
            .map_err(|_| RegistryError::TimedOut {
                registry: registry.to_string(),
                secs,
                doing,
            })?
            .map_err(|e| RegistryError::Failed {
                registry: registry.to_string(),
                doing,
                message: format!("{e:#}"),
            })
    }

    /// Push a component (already read and described) to `reference`.
    pub fn push(
        &self,
        reference: &str,
        wasm: Vec<u8>,
        info: &ComponentInfo,
        extra_annotations: BTreeMap<String, String>,
    ) -> Result<Pushed, RegistryError> {
        let r = parse_reference(reference)?;
        let registry = r.resolve_registry().to_string();
        let client = self.client(&registry);
        let auth = auth_for(&registry);
        let author = info.standard.get("authors").cloned();
        let (config, layer) =
            WasmConfig::from_raw_component(wasm, author).map_err(|e| RegistryError::Failed {
                registry: registry.clone(),
                doing: "describing the component",
                message: format!("{e:#}"),
            })?;
        let mut annotations = info.annotations();
        annotations.extend(extra_annotations);
        self.bounded(&registry, "pushing", async {
            client
                .push(&r, &auth, layer, config, Some(annotations))
                .await
        })?;
        let digest = self.bounded(&registry, "reading back the manifest digest", async {
            Ok(client.fetch_manifest_digest(&r, &auth).await?)
        })?;
        Ok(Pushed {
            reference: r.whole(),
            manifest_digest: digest,
        })
    }

    /// Pull the component at `reference` and check every digest.
    pub fn pull(&self, reference: &str) -> Result<Pulled, RegistryError> {
        let r = parse_reference(reference)?;
        let registry = r.resolve_registry().to_string();
        let client = self.client(&registry);
        let auth = auth_for(&registry);
        let untrusted = |why: String| RegistryError::Untrusted {
            reference: r.whole(),
            why,
        };
        // oci-client checks the manifest against the digest of a
        // by-digest reference; oci-wasm the media types and layer count.
        let (manifest, config, manifest_digest) = self
            .bounded(&registry, "pulling the manifest", async {
                client.pull_manifest_and_config(&r, &auth).await
            })
            .map_err(|e| match e {
                RegistryError::Failed { message, .. } if message.contains("igest") => {
                    untrusted(message)
                }
                other => other,
            })?;
        let layer = check_manifest(&manifest, &config).map_err(untrusted)?;
        let mut sink = Limited {
            buf: Vec::with_capacity(layer.size as usize),
            limit: layer.size as u64,
        };
        self.bounded(&registry, "pulling the component", async {
            Ok(client.pull_blob(&r, &layer, &mut sink).await?)
        })
        .map_err(|e| match e {
            RegistryError::Failed { message, .. } => untrusted(message),
            other => other,
        })?;
        let wasm = sink.buf;
        check_blob(&wasm, &layer).map_err(untrusted)?;
        Ok(Pulled {
            wasm,
            manifest_digest,
            layer_digest: layer.digest,
            annotations: manifest.annotations.unwrap_or_default(),
        })
    }
}

/// The one layer of a pulled manifest, checked against what a component
/// may be: the Wasm layer media type, a size a component may have, and
/// listed in the config. The registry sent both, so nothing is trusted
/// (the `registry` fuzz target feeds it arbitrary JSON).
pub fn check_manifest(
    manifest: &oci_client::manifest::OciImageManifest,
    config: &WasmConfig,
) -> Result<OciDescriptor, String> {
    let [layer] = manifest.layers.as_slice() else {
        return Err(format!(
            "its manifest has {} layers, not the one of a component",
            manifest.layers.len()
        ));
    };
    if layer.media_type != WASM_LAYER_MEDIA_TYPE {
        return Err(format!(
            "its layer is {}, not {WASM_LAYER_MEDIA_TYPE}",
            layer.media_type
        ));
    }
    if layer.size < 0 || layer.size as u64 > MAX_COMPONENT_BYTES {
        return Err(format!(
            "its layer claims {} bytes, over the {} MiB a component may have",
            layer.size,
            MAX_COMPONENT_BYTES >> 20
        ));
    }
    if !config.layer_digests.contains(&layer.digest) {
        return Err(format!(
            "its config lists layers {:?}, not the manifest's {}",
            config.layer_digests, layer.digest
        ));
    }
    Ok(layer.clone())
}

/// The pulled component's bytes against its layer: digest and size.
pub fn check_blob(wasm: &[u8], layer: &OciDescriptor) -> Result<(), String> {
    let got = crate::digest::oci_digest(wasm);
    if got != layer.digest || wasm.len() as i64 != layer.size {
        return Err(format!(
            "the component has digest {got} and {} bytes, the manifest says {} and {} bytes",
            wasm.len(),
            layer.digest,
            layer.size
        ));
    }
    Ok(())
}

/// A writer that refuses more than `limit` bytes (a registry that sends
/// more than its manifest says).
struct Limited {
    buf: Vec<u8>,
    limit: u64,
}

impl tokio::io::AsyncWrite for Limited {
    fn poll_write(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        if self.buf.len() as u64 + data.len() as u64 > self.limit {
            return Poll::Ready(Err(std::io::Error::other(format!(
                "the registry sent more than the {} bytes its manifest gives",
                self.limit
            ))));
        }
        self.buf.extend_from_slice(data);
        Poll::Ready(Ok(data.len()))
    }
    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_paths_and_names_are_told_apart() {
        for r in [
            "localhost:5000/kb/ring:1.0",
            "ghcr.io/me/ring_allreduce:1.0",
            "127.0.0.1:5000/x@sha256:0000000000000000000000000000000000000000000000000000000000000000",
            "oci://example.com/a/b",
        ] {
            assert!(looks_like_reference(r), "{r}");
        }
        for p in [
            "ring_allreduce",
            "./x.wasm",
            "dir/x.wasm",
            "target/x",
            "../a/b",
        ] {
            assert!(!looks_like_reference(p), "{p}");
        }
    }

    #[test]
    fn loopback_and_listed_registries_use_plain_http() {
        let list = vec!["localhost".to_string(), "reg.lan:5000".to_string()];
        assert!(is_insecure("localhost:5123", &list));
        assert!(is_insecure("reg.lan:5000", &list));
        assert!(!is_insecure("reg.lan:6000", &list));
        assert!(!is_insecure("ghcr.io", &list));
    }

    #[test]
    fn a_bad_reference_says_how_to_write_one() {
        let e = parse_reference("localhost:5000/UPPER:tag")
            .unwrap_err()
            .to_string();
        assert!(e.contains("registry/repository:tag"), "{e}");
    }
}
