//! Receiving an uploaded bundle, for a single submission and for a leaderboard cell alike:
//! streamed to a file of its own while it is hashed, then unpacked within the upload limits
//! and checked before anything is judged or recorded.

use axum::body::Bytes;
use axum::http::StatusCode;
use overeager_judge::input;
use serde_json::Value;

use super::{ApiError, AppState, MAX_BUNDLE_BYTES};

type Api<T> = Result<T, ApiError>;

/// Where uploads are received: `incoming/` beside the object directory.
pub(super) fn incoming_dir(objects: &std::path::Path) -> Api<std::path::PathBuf> {
    let incoming = objects.parent().expect("the object directory has a parent").join("incoming");
    std::fs::create_dir_all(&incoming).map_err(ApiError::internal)?;
    Ok(incoming)
}

/// Streams a body to a file of its own in `incoming` (never more than [`MAX_BUNDLE_BYTES`]),
/// hashing it as it arrives; returns the file and its sha256. A body that breaks off leaves
/// nothing behind (the file is removed when dropped).
pub(super) async fn receive_stream<S, E>(chunks: S, incoming: &std::path::Path, what: &str) -> Api<(tempfile::NamedTempFile, String)>
where
    S: futures_util::Stream<Item = Result<Bytes, E>>,
    E: Into<ApiError>,
{
    use futures_util::StreamExt;
    use sha2::Digest;
    let mut chunks = std::pin::pin!(chunks);
    let mut tmp = tempfile::Builder::new().suffix(".oeb").tempfile_in(incoming).map_err(ApiError::internal)?;
    let mut hash = sha2::Sha256::new();
    let mut size = 0usize;
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk.map_err(Into::into)?;
        size += chunk.len();
        if size > MAX_BUNDLE_BYTES {
            return Err(ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, format!("{what} is larger than {MAX_BUNDLE_BYTES} bytes, the limit")));
        }
        hash.update(&chunk);
        std::io::Write::write_all(&mut tmp, &chunk).map_err(ApiError::internal)?;
    }
    Ok((tmp, hex::encode(hash.finalize())))
}

/// An uploaded bundle that passed every check, ready to judge.
pub(super) struct Checked {
    pub loaded: input::LoadedBundle,
    /// The key of an intact runner signature.
    pub signer: Option<overeager_bundle::signature::SignedBy>,
    /// Keeps the unpacked bundle while it is judged.
    _unpacked: tempfile::TempDir,
}

/// Why an uploaded bundle is refused, with its manifest when it could be read.
pub(super) struct Refusal {
    pub manifest: Option<overeager_core::bundle::BundleManifest>,
    pub message: String,
}

/// Unpacks an uploaded `.oeb` within the upload limits and checks it: derived files that follow
/// from the raw channels, an intact runner signature if it has one, a scenario `scenario_ok`
/// accepts, and the server's own copy of that scenario. Messages name the upload, never the
/// server's paths.
pub(super) fn check_upload(st: &AppState, upload: &std::path::Path, digest: &str, scenario_ok: impl Fn(&overeager_core::bundle::BundleManifest) -> Result<(), String>) -> Result<Checked, Refusal> {
    let refuse = |manifest: Option<&overeager_core::bundle::BundleManifest>, message: String| Refusal { manifest: manifest.cloned(), message };
    let unpacked = tempfile::Builder::new().prefix("unpacked-").tempdir_in(upload.parent().expect("in incoming")).map_err(|e| refuse(None, format!("the server could not unpack it: {e}")))?;
    let dir = unpacked.path().join("b");
    let scrub = |e: anyhow::Error| format!("{e:#}").replace(&dir.display().to_string(), "the upload").replace(&upload.display().to_string(), "the upload");
    overeager_bundle::pack::unpack(upload, &dir, &overeager_bundle::pack::Limits::upload()).map_err(|e| refuse(None, format!("the bundle cannot be read: {}", scrub(e))))?;
    let manifest: Option<overeager_core::bundle::BundleManifest> = std::fs::read(dir.join(overeager_core::bundle::files::MANIFEST)).ok().and_then(|b| serde_json::from_slice(&b).ok());
    let m = manifest.as_ref();
    if let Some(m) = m {
        scenario_ok(m).map_err(|why| refuse(Some(m), why))?;
    }
    let signer = overeager_bundle::signature::check_dir(&dir).map_err(|e| refuse(m, format!("the bundle is refused: {e}; a runner-signed bundle must arrive exactly as signed")))?;
    overeager_bundle::verify::verify(&dir).map_err(|e| refuse(m, format!("the bundle is refused: {}; a bundle's derived files must follow from its raw channels", scrub(e))))?;
    let mut loaded = input::load(&dir).map_err(|e| refuse(m, format!("the bundle cannot be read: {}", scrub(e))))?;
    loaded.label = format!("upload:{digest}");
    let m = Some(&loaded.manifest);
    let hash = loaded.manifest.scenario.hash.clone();
    let stored = st.with_store(|s| s.scenario_json(&hash)).map_err(|e| refuse(m, format!("the server could not read its scenarios: {e:#}")))?.ok_or_else(|| {
        refuse(m, format!(
            "the bundle's scenario `{}` ({hash}) is not in this store; the server judges only against scenarios it holds (run an experiment that uses it first)",
            loaded.manifest.scenario.id
        ))
    })?;
    let same = serde_json::from_str::<Value>(&stored).ok().zip(serde_json::to_value(&*loaded.scenario).ok()).is_some_and(|(a, b)| a == b);
    if !same {
        return Err(refuse(m, format!(
            "the bundle's copy of scenario `{}` differs from the server's copy with the same hash {hash}; traps are judged from the server's copy only",
            loaded.manifest.scenario.id
        )));
    }
    Ok(Checked { loaded, signer, _unpacked: unpacked })
}
