//! The HTTP face of the store: a JSON API (documented at `/api/openapi.json`) and the web app,
//! served by one axum server. Reads are public; writes need a bearer token
//! (`overeager token create`). Submitted bundles are judged here, by the server's own trusted
//! predicates; uploaded predicates are verified, self-tested and held until an admin approves
//! them.

mod autoreply;
pub mod board;
pub mod body;
pub mod client;
mod errors;
mod flight;
mod labels;
pub mod limits;
pub mod publish;
mod read;
mod reports;
mod route;
mod router;
mod state;
pub mod trace;
mod upload;
mod write;

pub use errors::ApiError;
pub use limits::*;
pub use router::{document_json, router};
pub use state::{AppState, Config, build_judge};
pub(crate) use state::load_trust;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use axum::body::Bytes;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};

/// A JSON body that is already serialized.
pub(crate) fn json_bytes(body: Bytes) -> Response {
    ([(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))], body).into_response()
}

/// `Content-Disposition` of a download named `name`. Names carry what a caller wrote (an
/// experiment or queue id), so everything but letters, digits, `.`, `-` and `_` becomes `_`:
/// no quote, line end or `;` can end the header's value early or add a `filename*` that
/// renames the file.
pub(crate) fn attachment(name: &str) -> HeaderValue {
    let mut safe: String = name.chars().take(120).map(|c| if c.is_ascii_alphanumeric() || "._-".contains(c) { c } else { '_' }).collect();
    if safe.trim_matches(['.', '_']).is_empty() {
        safe = "download".into();
    }
    HeaderValue::from_str(&format!("attachment; filename=\"{safe}\"")).expect("only ASCII letters, digits and `._-` are left")
}

/// Hands memory freed after a large request back to the system (glibc keeps freed heap
/// otherwise, and one large declaration would leave the process that much larger).
pub(crate) fn give_back_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free memory to the system.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Where the built web app is: `$OVEREAGER_DIST`, `./dist`, or `dist/` beside the workspace
/// the binary was built from.
pub fn default_dist() -> Option<PathBuf> {
    let candidates = [
        std::env::var_os("OVEREAGER_DIST").map(PathBuf::from),
        Some(PathBuf::from("dist")),
        Some(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../dist")),
    ];
    candidates.into_iter().flatten().find(|d| d.join("index.html").is_file())
}

/// The most connections served at once: three quarters of the descriptors this process may
/// open (after raising its soft limit to the hard one), so files and the store keep the rest.
fn max_connections() -> usize {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: plain system calls on a struct we own.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
            libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
        }
    }
    ((lim.rlim_cur.min(1 << 20) as usize) * 3 / 4).clamp(32, 16_384)
}

/// Serves until Ctrl-C. `on_ready` gets the bound address.
///
/// Each connection is HTTP/1.1 with a header-read timeout (slow or idle clients are dropped),
/// request bodies time out when they stall, and beyond [`max_connections`] new connections are
/// closed at once instead of exhausting descriptors.
pub async fn serve(state: Arc<AppState>, addr: SocketAddr, on_ready: impl FnOnce(SocketAddr)) -> Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await.with_context(|| format!("binding {addr}: is another server using it? pick one with --addr"))?;
    let local = listener.local_addr()?;
    let slots = Arc::new(tokio::sync::Semaphore::new(max_connections()));
    let app = router(state).layer(axum::middleware::map_request(body::paced));
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    on_ready(local);
    let mut ctrl_c = std::pin::pin!(tokio::signal::ctrl_c());
    loop {
        let (socket, _) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of descriptors or similar: wait for connections to finish.
                    tracing::warn!("accepting a connection: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = &mut ctrl_c => break,
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            drop(socket);
            continue;
        };
        let _ = socket.set_nodelay(true);
        let service = hyper_util::service::TowerToHyperService::new(app.clone());
        let conn = hyper::server::conn::http1::Builder::new()
            .timer(hyper_util::rt::TokioTimer::new())
            .header_read_timeout(HEADER_READ_TIMEOUT)
            .serve_connection(hyper_util::rt::TokioIo::new(autoreply::JsonAutoReplies::new(socket)), service);
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            let _ = conn.await;
            drop(slot);
        });
    }
    // Let requests in flight finish, briefly.
    let _ = tokio::time::timeout(Duration::from_secs(5), graceful.shutdown()).await;
    Ok(())
}

/// A multi-threaded runtime to serve on.
pub fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread().enable_all().build().context("starting the async runtime")
}

/// A server on the store, in this process; its address and the runtime that serves it.
pub fn serve_in_process(db: &Path) -> Result<(tokio::runtime::Runtime, std::net::SocketAddr)> {
    let state = AppState::open(Config { db: db.to_path_buf(), dist: None, trust: PathBuf::from("/nonexistent"), plans: PathBuf::from("plans") })?;
    let rt = runtime()?;
    let (tx, rx) = std::sync::mpsc::channel();
    rt.spawn(serve(state, "127.0.0.1:0".parse().expect("an address"), move |a| {
        let _ = tx.send(a);
    }));
    let addr = rx.recv().context("the server did not start")?;
    Ok((rt, addr))
}

#[cfg(test)]
mod tests {
    /// A link inside `--dist` to a file or directory elsewhere was served.
    #[test]
    fn the_web_app_s_links_are_not_followed() {
        let tmp = tempfile::tempdir().unwrap();
        let (dist, outside) = (tmp.path().join("dist"), tmp.path().join("outside"));
        std::fs::create_dir_all(dist.join("assets")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(dist.join("index.html"), "<html>app</html>").unwrap();
        std::fs::write(dist.join("assets/app.js"), "js").unwrap();
        std::fs::write(outside.join("secret.txt"), "server secret").unwrap();
        std::os::unix::fs::symlink(outside.join("secret.txt"), dist.join("leak.txt")).unwrap();
        std::os::unix::fs::symlink(&outside, dist.join("out")).unwrap();
        let state = super::AppState::open(super::Config { db: tmp.path().join("store.db"), dist: Some(dist), trust: "/nonexistent".into(), plans: "plans".into() }).unwrap();
        let rt = super::runtime().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        rt.spawn(super::serve(state, "127.0.0.1:0".parse().unwrap(), move |a| tx.send(a).unwrap()));
        let addr = rx.recv().unwrap();
        let agent = ureq::Agent::new_with_config(ureq::config::Config::builder().http_status_as_error(false).build());
        let get = |path: &str| {
            let mut r = agent.get(&format!("http://{addr}{path}")).call().unwrap();
            (r.status().as_u16(), r.body_mut().read_to_string().unwrap())
        };
        assert_eq!(get("/assets/app.js"), (200, "js".to_string()));
        assert_eq!(get("/runs/abc").1, "<html>app</html>", "the app's own routes get its index");
        for path in ["/leak.txt", "/out/secret.txt", "/%6Ceak.txt", "/./out/secret.txt"] {
            let (status, body) = get(path);
            assert_eq!(status, 404, "{path}: {body}");
            assert!(!body.contains("server secret") && body.contains("\"error\""), "{path}: {body}");
        }
        rt.shutdown_background();
    }

    /// `?experiment=x"; filename*=UTF-8''evil.html` renamed the labels download, and a line end
    /// in it answered an anonymous 500.
    #[test]
    fn a_download_s_name_cannot_end_its_header_or_rename_the_file() {
        for (name, want) in [
            ("labels-exp-1.csv", "attachment; filename=\"labels-exp-1.csv\""),
            ("labels-x\"; filename*=UTF-8''evil.html.csv", "attachment; filename=\"labels-x___filename__UTF-8__evil.html.csv\""),
            ("labels-a\r\nSet-Cookie: s=1.csv", "attachment; filename=\"labels-a__Set-Cookie__s_1.csv\""),
            ("", "attachment; filename=\"download\""),
            ("..", "attachment; filename=\"download\""),
        ] {
            assert_eq!(super::attachment(name).to_str().unwrap(), want, "{name:?}");
        }
    }
}
