//! Talking to the server: the live JSON API, or the files of a published static site (the same
//! paths with `.json` appended), chosen by a marker the publisher puts in the page.

use overeager_wire::endpoint::{self, Endpoint, Method};
use serde::de::DeserializeOwned;

/// Whether this page is a published static site.
pub fn is_static() -> bool {
    thread_local! {
        static STATIC: bool = web_sys::window()
            .and_then(|w| w.document())
            .and_then(|d| d.query_selector("meta[name=overeager-static]").ok().flatten())
            .is_some();
    }
    STATIC.with(|s| *s)
}

/// The URL of an API document (`path` is an endpoint's, with any query).
pub fn json_url(path: &str) -> String {
    if is_static() { format!("{path}.json") } else { path.to_string() }
}

/// The URL of a raw text file of a bundle.
pub fn text_url(path: &str) -> String {
    if is_static() { format!("{path}.txt") } else { path.to_string() }
}

/// The URL of a run exported for other tools, `format` being `atif` (a trajectory) or
/// `inspect` (an `.eval` log): the live API, or the file a published site has.
pub fn export_url(run: &str, format: &str) -> String {
    if is_static() {
        let file = if format == "atif" { "atif.json" } else { "inspect.eval" };
        format!("{}/{file}", endpoint::RUN_EXPORT.url(&[run]))
    } else {
        format!("{}?format={format}", endpoint::RUN_EXPORT.url(&[run]))
    }
}


async fn fetch(url: &str) -> Result<gloo_net::http::Response, String> {
    fetch_as(url, "").await
}

/// GETs `url`, with a bearer token when one is given (and the API is live).
async fn fetch_as(url: &str, token: &str) -> Result<gloo_net::http::Response, String> {
    let mut req = gloo_net::http::Request::get(url);
    if !token.trim().is_empty() && !is_static() {
        req = req.header("Authorization", &format!("Bearer {}", token.trim()));
    }
    let resp = req.send().await.map_err(|e| format!("{url}: {e}"))?;
    if resp.ok() {
        return Ok(resp);
    }
    let status = resp.status();
    let body = resp.text().await.unwrap_or_default();
    let msg = serde_json::from_str::<serde_json::Value>(&body)
        .ok()
        .and_then(|v| v.get("error").and_then(|e| e.as_str()).map(str::to_string))
        .unwrap_or_else(|| if status == 404 { "not found (not published?)".to_string() } else { body });
    Err(format!("{status}: {msg}"))
}

/// GETs the document of `endpoint` with its `params` filled in and `query` (empty, or
/// `k=v&…` already encoded) after `?`: the endpoint says what type it is.
pub async fn doc<T: DeserializeOwned>(endpoint: &Endpoint<T>, params: &[&str], query: &str) -> Result<T, String> {
    let path = endpoint.url(params);
    get(&if query.is_empty() { path } else { format!("{path}?{query}") }).await
}

/// GETs an API document.
pub async fn get<T: DeserializeOwned>(path: &str) -> Result<T, String> {
    let url = json_url(path);
    fetch(&url).await?.json::<T>().await.map_err(|e| format!("{url}: {e}"))
}

/// GETs an API document as the holder of `token` (a page that shows its owner more).
pub async fn get_as<T: DeserializeOwned>(path: &str, token: &str) -> Result<T, String> {
    let url = json_url(path);
    fetch_as(&url, token).await?.json::<T>().await.map_err(|e| format!("{url}: {e}"))
}

/// POSTs a JSON body with a bearer token (live API only) and returns the answer; an error
/// answer becomes its `error` message.
pub async fn post<B: serde::Serialize, T: DeserializeOwned>(path: &str, token: &str, body: &B) -> Result<T, String> {
    send(Method::Post, path, token, Some(body)).await
}

/// Sends a request with a bearer token (live API only), with a JSON body if given, and returns
/// the answer; an error answer becomes its `error` message.
pub async fn send<B: serde::Serialize, T: DeserializeOwned>(method: Method, path: &str, token: &str, body: Option<&B>) -> Result<T, String> {
    use gloo_net::http::RequestBuilder;
    let url = path.to_string();
    let method = match method {
        Method::Get => gloo_net::http::Method::GET,
        Method::Put => gloo_net::http::Method::PUT,
        Method::Delete => gloo_net::http::Method::DELETE,
        Method::Post => gloo_net::http::Method::POST,
    };
    let req = RequestBuilder::new(&url).method(method).header("Authorization", &format!("Bearer {}", token.trim()));
    let req = match body {
        Some(b) => req.json(b).map_err(|e| format!("{url}: {e}"))?,
        None => req.build().map_err(|e| format!("{url}: {e}"))?,
    };
    let resp = req.send().await.map_err(|e| format!("{url}: {e}"))?;
    let status = resp.status();
    if (200..300).contains(&status) {
        resp.json::<T>().await.map_err(|e| format!("{url}: {e}"))
    } else {
        let v: serde_json::Value = resp.json().await.unwrap_or(serde_json::Value::Null);
        Err(v.get("error").and_then(|e| e.as_str()).map(str::to_string).unwrap_or_else(|| format!("{url}: {status}")))
    }
}

/// GETs a raw text file.
pub async fn get_text(path: &str) -> Result<String, String> {
    let url = text_url(path);
    fetch(&url).await?.text().await.map_err(|e| format!("{url}: {e}"))
}

/// Percent-encodes a query value.
pub fn enc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~:".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
