//! Content digests: SHA-256 of bytes as lowercase hex (compiled-code and
//! layout cache keys, sweep specs, `inspect`) and as OCI writes a digest.
//! Part of the simulator core, so the topology's layout cache has it
//! without the runtime.

/// SHA-256 of bytes as lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    format!("{:x}", sha2::Sha256::digest(bytes))
}

/// SHA-256 of bytes as OCI writes a digest: `sha256:<hex>`.
pub fn oci_digest(bytes: &[u8]) -> String {
    format!("sha256:{}", sha256_hex(bytes))
}

#[cfg(test)]
mod tests {
    #[test]
    fn digests_are_sha256_in_hex() {
        assert_eq!(
            super::sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert!(super::oci_digest(b"").starts_with("sha256:e3b0c442"));
    }
}
