//! Reading the files users give (configs, sweep plans, reports,
//! components) within a size bound: one reader that refuses devices,
//! pipes and sockets and never reads past its limit, whatever the file's
//! metadata says. Every size that comes from outside goes through it.

/// Why a file could not be read by [`read_bounded`].
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("{path} is not a regular file (a device, pipe or socket?); give the path of a file")]
    NotRegular { path: String },
    #[error("{path} is over the {limit} bytes KernBench reads from such a file")]
    TooLarge { path: String, limit: u64 },
    #[error("cannot read {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
}

/// Read a regular file of at most `limit` bytes. The size is checked on
/// the bytes read, not only on the file's metadata, so a file that grows
/// while it is read (or lies about its length) cannot make the host read
/// more than `limit` + 1 bytes; devices, pipes and sockets are refused.
pub fn read_bounded(path: &std::path::Path, limit: u64) -> Result<Vec<u8>, ReadError> {
    use std::io::Read;
    let shown = || path.display().to_string();
    let io = |source| ReadError::Io {
        path: shown(),
        source,
    };
    // stat before open: opening a FIFO for reading blocks until a writer
    // comes; then fstat what was opened, in case the path changed.
    if !std::fs::metadata(path).map_err(io)?.is_file() {
        return Err(ReadError::NotRegular { path: shown() });
    }
    let file = std::fs::File::open(path).map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    if !meta.is_file() {
        return Err(ReadError::NotRegular { path: shown() });
    }
    let too_large = || ReadError::TooLarge {
        path: shown(),
        limit,
    };
    if meta.len() > limit {
        return Err(too_large());
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > limit {
        return Err(too_large());
    }
    Ok(bytes)
}

/// The most a text file the user gives (a topology or ccl.yaml, a sweep
/// plan, a JSON report) may hold.
pub const MAX_TEXT_BYTES: u64 = 64 << 20;

/// [`read_bounded`] to [`MAX_TEXT_BYTES`], as UTF-8 text.
pub fn read_text(path: &std::path::Path) -> Result<String, ReadError> {
    let bytes = read_bounded(path, MAX_TEXT_BYTES)?;
    String::from_utf8(bytes).map_err(|e| ReadError::Io {
        path: path.display().to_string(),
        source: std::io::Error::new(std::io::ErrorKind::InvalidData, e),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_bounded_refuses_devices_and_stops_at_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("x.wasm");
        std::fs::write(&f, [7u8; 100]).unwrap();
        assert_eq!(read_bounded(&f, 100).unwrap().len(), 100);
        let e = read_bounded(&f, 99).unwrap_err();
        assert!(matches!(e, ReadError::TooLarge { limit: 99, .. }), "{e}");
        // /dev/zero has length 0 and never ends: refused before any read.
        let e = read_bounded(std::path::Path::new("/dev/zero"), 10).unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e}");
        assert!(matches!(
            read_bounded(&dir.path().join("no"), 1),
            Err(ReadError::Io { .. })
        ));
        assert!(matches!(
            read_bounded(dir.path(), 1),
            Err(ReadError::NotRegular { .. })
        ));
    }
}
