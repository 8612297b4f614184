//! `overeager-shim gateway`: the model gateway a real agent on a real model talks to instead
//! of its provider. It forwards each request to the provider with the real key (which only
//! this process holds: the agent gets a placeholder), passes the reply back as it arrives (a
//! streamed reply is relayed piece by piece, never buffered whole), and writes every request
//! and reply to the model channel as the scripted model does, with the provider's failures
//! classified.
//!
//! With `--agent-dialect`, the agent speaks another dialect than the provider: each model
//! call is translated both ways by the dialect bridge (`overeager-bridge`), streams event by
//! event, and its record holds both sides (`ModelRecord::bridged`). A streamed Chat
//! Completions call that does not ask for usage is made to ask, and its reply reaches the
//! agent without it, so the run's tokens are the provider's own (both sides recorded too).
//!
//! The key comes on standard input (`--key-stdin`), so it is in no environment block a
//! process on the machine could read from `/proc/<pid>/environ`; or, in a container of its
//! own, from the variable `--key-env` names. The process makes itself non-dumpable: an agent
//! running as the same user cannot read its memory either.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use overeager_formats::model::{self, Dialect, ModelRecord, Vocab};
use overeager_core::model::ProviderSide;
use serde_json::Value;

use crate::{flag, http, now_us};

/// How long connecting to the provider may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(20);
/// How long a reply may be silent (a model thinking before its first token included).
const READ_TIMEOUT: Duration = Duration::from_secs(600);
/// The most of one reply kept in the record (the agent gets all of it); the record says how
/// long the reply was (`reply_bytes`).
const MAX_REPLY: usize = 8 << 20;
/// The most of a run's requests and replies kept in its model record, so that a bundle stays
/// within what a server takes (48 MiB) and what reading it back costs: past it, a reply keeps
/// what room is left and a request is noted by its size.
const MAX_RUN_RECORD: usize = 32 << 20;
/// How long a reply that had begun may be silent, when the run ends, to be called stalled.
const STALLED: Duration = Duration::from_secs(10);

/// Where the provider is: scheme, host, port and the path its dialect's routes hang off.
#[derive(Debug, Clone, PartialEq)]
pub struct Upstream {
    pub tls: bool,
    pub host: String,
    pub port: u16,
    /// Without a trailing `/` (empty for the root).
    pub base_path: String,
}

impl Upstream {
    /// Parses `http[s]://host[:port][/path]`.
    pub fn parse(url: &str) -> Result<Upstream, String> {
        let (tls, rest) = if let Some(r) = url.strip_prefix("https://") {
            (true, r)
        } else if let Some(r) = url.strip_prefix("http://") {
            (false, r)
        } else {
            return Err(format!("--upstream `{url}` is not an http:// or https:// URL"));
        };
        let (authority, path) = rest.find('/').map(|i| (&rest[..i], &rest[i..])).unwrap_or((rest, ""));
        let (host, port) = match authority.rsplit_once(':') {
            Some((h, p)) if !h.ends_with(']') || authority.starts_with('[') => (h, p.parse().map_err(|_| format!("--upstream `{url}`: `{p}` is not a port"))?),
            _ => (authority, if tls { 443 } else { 80 }),
        };
        if host.is_empty() {
            return Err(format!("--upstream `{url}` names no host"));
        }
        Ok(Upstream { tls, host: host.trim_matches(['[', ']']).to_string(), port, base_path: path.trim_end_matches('/').to_string() })
    }

    /// `host:port` as a `Host` header says it.
    fn authority(&self) -> String {
        let host = if self.host.contains(':') { format!("[{}]", self.host) } else { self.host.clone() };
        if self.port == if self.tls { 443 } else { 80 } { host } else { format!("{host}:{}", self.port) }
    }
}

/// How the key goes on a request: by the provider's dialect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Auth {
    /// `x-api-key` (Anthropic Messages).
    ApiKeyHeader,
    /// `Authorization: Bearer` (OpenAI's dialects and the servers that copy them).
    Bearer,
    /// `x-goog-api-key` (Gemini).
    GoogHeader,
}

impl Auth {
    fn parse(dialect: &str) -> Result<Auth, String> {
        match dialect {
            "anthropic" => Ok(Auth::ApiKeyHeader),
            "openai-chat" | "openai-responses" => Ok(Auth::Bearer),
            "gemini" => Ok(Auth::GoogHeader),
            other => Err(format!("--dialect `{other}` is not one of anthropic, openai-chat, openai-responses, gemini")),
        }
    }

    fn header(self, key: &str) -> String {
        match self {
            Auth::ApiKeyHeader => format!("x-api-key: {key}\r\n"),
            Auth::Bearer => format!("Authorization: Bearer {key}\r\n"),
            Auth::GoogHeader => format!("x-goog-api-key: {key}\r\n"),
        }
    }
}

/// Request headers the gateway sets itself or must not pass on: connection-level ones, the
/// framing (re-done here), compression (the record keeps the text), and every way a key is
/// sent (the agent's is a placeholder).
const DROPPED_REQUEST_HEADERS: &[&str] = &[
    "host", "connection", "keep-alive", "proxy-connection", "proxy-authorization", "te", "trailer", "upgrade", "transfer-encoding",
    "content-length", "accept-encoding", "authorization", "x-api-key", "x-goog-api-key", "api-key",
];

/// Reply headers not passed back: connection-level ones and the framing, which the gateway
/// sets for its own connection to the agent.
const DROPPED_REPLY_HEADERS: &[&str] = &["connection", "keep-alive", "proxy-connection", "te", "trailer", "upgrade", "transfer-encoding", "content-length"];

trait Conn: Read + Write + Send {}
impl<T: Read + Write + Send> Conn for T {}

type UpConn = BufReader<Box<dyn Conn>>;

struct Gateway {
    upstream: Upstream,
    /// The agent's path prefix the upstream's base path stands for (`/v1` for the OpenAI
    /// dialects, whose base URLs end in their version).
    prefix: String,
    auth: Auth,
    key: Option<String>,
    tls: Option<Arc<rustls::ClientConfig>>,
    idle: Mutex<Vec<UpConn>>,
    log: Option<Mutex<Box<dyn Write + Send>>>,
    seq: AtomicU64,
    /// Calls being relayed or recorded now.
    in_flight: std::sync::atomic::AtomicUsize,
    /// The calls not yet recorded, by seq: recorded as in flight if the run ends first.
    pending: Mutex<BTreeMap<u64, Pending>>,
    /// The agent calls no tools: a request without tools is its main loop (`--text-replies`).
    text_replies: bool,
    /// Main-loop requests recorded, which number a text agent's turns.
    turns: AtomicU64,
    /// Bytes of requests and replies recorded so far (at most `MAX_RUN_RECORD`).
    recorded: Mutex<usize>,
    /// The provider's dialect, and the agent's when the two differ (`--agent-dialect`).
    dialects: Dialects,
}

/// The dialects of a gateway's two sides.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Dialects {
    provider: Dialect,
    /// Set when the agent speaks another dialect: its model calls are bridged.
    agent: Option<Dialect>,
    /// The most tokens the provider answers with (`--max-output-tokens`): a request asking for
    /// more, or for no limit, is sent with this one, and its record says so.
    max_output: Option<u64>,
}

impl Dialects {
    /// What a model call `path` of the agent becomes: translated for the provider, made to ask
    /// for usage, or (`None`) forwarded as it is.
    fn plan(&self, method: &str, path: &str, body: &[u8], seq: u64) -> Option<Result<overeager_bridge::Call, overeager_bridge::CannotCarry>> {
        if !overeager_bridge::is_model_call(method, path) {
            return None;
        }
        match self.agent {
            Some(agent) => Some(overeager_bridge::translate_request(agent, self.provider, path, body, seq, self.max_output)),
            None => overeager_bridge::adjust(self.provider, path, body, seq, self.max_output).map(Ok),
        }
    }
}

/// A dialect as `--dialect` names it.
fn dialect_named(name: &str) -> Result<Dialect, String> {
    match name {
        "anthropic" => Ok(Dialect::Anthropic),
        "openai-chat" => Ok(Dialect::Chat),
        "openai-responses" => Ok(Dialect::Responses),
        "gemini" => Ok(Dialect::Gemini),
        other => Err(format!("`{other}` is not one of anthropic, openai-chat, openai-responses, gemini")),
    }
}

/// A call being relayed: what its record holds so far, should the run end before its reply.
struct Pending {
    record: ModelRecord,
    request: Vec<u8>,
    started: Instant,
    reply: Arc<Mutex<Received>>,
}

/// The reply as received so far.
#[derive(Default)]
struct Received {
    kept: Vec<u8>,
    total: usize,
    last: Option<Instant>,
}

impl Received {
    /// Keeps what arrived, up to the limit of one reply.
    fn keep(&mut self, data: &[u8], arrived: Instant) {
        if self.kept.len() < MAX_REPLY {
            let room = MAX_REPLY - self.kept.len();
            self.kept.extend_from_slice(&data[..data.len().min(room)]);
        }
        self.total += data.len();
        self.last = Some(arrived);
    }

    /// Puts what was kept into `record`, noting the whole size when that is only a beginning.
    fn fill(&self, record: &mut ModelRecord) {
        record.reply = String::from_utf8_lossy(&self.kept).into_owned();
        record.reply_bytes = (self.total > self.kept.len()).then_some(self.total as u64);
    }
}

/// How a call still unanswered when the run ended failed: stalled (its reply had begun and
/// then went silent), or simply in flight.
fn in_flight_failure(waited: Duration, received: &Received) -> String {
    let waited = waited.as_secs_f64();
    let [in_flight, stalled] = model::UNANSWERED_AT_END;
    match received.last.map(|t| t.elapsed()) {
        None => format!("{in_flight} after {waited:.1} s, no reply yet"),
        Some(silent) if silent >= STALLED => format!("{stalled} after {} bytes: nothing for {:.1} s when the run ended", received.total, silent.as_secs_f64()),
        Some(_) => format!("{in_flight} after {waited:.1} s, {} bytes of the reply received", received.total),
    }
}

/// The provider's own words for a failure: an error object's message in a JSON body, or in
/// a streamed event's data.
fn upstream_error(reply: &str) -> Option<String> {
    let message = |v: &Value| -> Option<String> {
        let e = v.get("error")?;
        let text = e.get("message").and_then(Value::as_str).or_else(|| e.as_str()).map(str::to_string).unwrap_or_else(|| e.to_string());
        Some(text.chars().take(300).collect())
    };
    if let Ok(v) = serde_json::from_str::<Value>(reply.trim()) {
        return message(&v).or_else(|| v.get("detail").and_then(Value::as_str).map(|d| d.chars().take(300).collect()));
    }
    reply.lines().filter_map(|l| l.trim().strip_prefix("data:")).filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok()).find_map(|v| message(&v))
}

/// How a reply's body is delimited.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Framing {
    None,
    Length(u64),
    Chunked,
    UntilClose,
}

/// The reply's head as the provider sent it.
struct ReplyHead {
    status: u16,
    reason: String,
    headers: Vec<(String, String)>,
    framing: Framing,
    reusable: bool,
}

impl Gateway {
    #[allow(clippy::too_many_arguments)]
    fn new(upstream: Upstream, prefix: &str, auth: Auth, key: Option<String>, tls: Option<Arc<rustls::ClientConfig>>, log: Option<Box<dyn Write + Send>>, text_replies: bool, dialects: Dialects) -> Arc<Gateway> {
        let log = log.map(Mutex::new);
        let prefix = prefix.trim_end_matches('/').to_string();
        Arc::new(Gateway { upstream, prefix, auth, key, tls, idle: Mutex::new(Vec::new()), log, seq: AtomicU64::new(0), in_flight: Default::default(), pending: Default::default(), text_replies, turns: AtomicU64::new(0), recorded: Mutex::new(0), dialects })
    }

    /// Serves every connection `listener` accepts, each on a thread of its own.
    fn serve_all(self: Arc<Self>, listener: TcpListener) {
        for conn in listener.incoming().flatten() {
            let gateway = self.clone();
            std::thread::spawn(move || gateway.serve(conn));
        }
    }

    /// The path to ask the provider for, from the agent's.
    fn upstream_path(&self, path: &str) -> String {
        let rest = path.strip_prefix(self.prefix.as_str()).filter(|r| r.is_empty() || r.starts_with(['/', '?'])).unwrap_or(path);
        let rest = if self.auth == Auth::GoogHeader { strip_key_param(rest) } else { rest.to_string() };
        format!("{}{rest}", self.upstream.base_path)
    }

    fn connect(&self) -> Result<UpConn, String> {
        let u = &self.upstream;
        let addrs = (u.host.as_str(), u.port).to_socket_addrs().map_err(|e| format!("no connection: resolving {}: {e}", u.host))?;
        let mut last = format!("no connection: {} has no address", u.host);
        for addr in addrs {
            match TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT) {
                Ok(tcp) => {
                    let _ = tcp.set_nodelay(true);
                    let _ = tcp.set_read_timeout(Some(READ_TIMEOUT));
                    let conn: Box<dyn Conn> = match &self.tls {
                        Some(config) => {
                            let name = rustls::pki_types::ServerName::try_from(u.host.clone()).map_err(|e| format!("no connection: `{}` is no TLS server name: {e}", u.host))?;
                            let mut tls = rustls::ClientConnection::new(config.clone(), name).map_err(|e| format!("no connection: TLS: {e}"))?;
                            let mut tcp = tcp;
                            // The handshake now, so a certificate the gateway does not trust is
                            // named as such, and connecting is timed apart from relaying.
                            while tls.is_handshaking() {
                                tls.complete_io(&mut tcp).map_err(|e| format!("no connection: TLS with {}: {e}", u.host))?;
                            }
                            Box::new(rustls::StreamOwned::new(tls, tcp))
                        }
                        None => Box::new(tcp),
                    };
                    return Ok(BufReader::new(conn));
                }
                Err(e) => last = format!("no connection: {addr}: {e}"),
            }
        }
        Err(last)
    }

    /// Sends the request and reads the reply's head, on an idle connection when there is one
    /// (and once more on a new one if that had been closed meanwhile). Also says when the
    /// request was sent, and how long connecting to the provider took (which an agent talking
    /// to it directly spends too).
    fn send(&self, request: &[u8], head_only: bool) -> Result<(UpConn, Instant, Duration, ReplyHead), String> {
        let reused = self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop();
        if let Some(mut conn) = reused
            && let Ok(sent) = send_on(&mut conn, request)
            && let Ok(head) = read_reply_head(&mut conn, head_only)
        {
            return Ok((conn, sent, Duration::ZERO, head));
        }
        let t = Instant::now();
        let mut conn = self.connect()?;
        let connecting = t.elapsed();
        let sent = send_on(&mut conn, request)?;
        let head = read_reply_head(&mut conn, head_only)?;
        Ok((conn, sent, connecting, head))
    }

    /// Completes `record` with what the request was (its dialect, whether the agent's main
    /// loop asked, which turn) and writes it.
    fn record(&self, record: &mut ModelRecord, body: &[u8]) {
        let request: Value = serde_json::from_slice(body).unwrap_or_else(|_| Value::String(String::from_utf8_lossy(body).into_owned()));
        record.dialect = Dialect::of_path(&record.path).map(|(d, _)| d).filter(|_| record.method == "POST");
        let vocab = record.dialect.map(|d| Vocab::of_request(d, &request));
        let in_text = self.text_replies && vocab.as_ref().is_some_and(|v| v.tools.is_empty()) && request.get("messages").is_some();
        record.side = !in_text && vocab.is_none_or(|v| !v.is_main_loop());
        record.step = match record.dialect.filter(|_| !record.side) {
            Some(_) if in_text => Some(self.turns.fetch_add(1, Ordering::Relaxed) as usize),
            Some(d) => Some(model::answered_calls(d, &request).len()),
            None => None,
        };
        record.request = request;
        self.keep_within_limit(record, body.len());
        if let Some(log) = &self.log {
            crate::append_record(log, record);
        }
    }

    /// Cuts what `record` keeps to the room left in the run's model record: the request
    /// (noted by its size when it does not fit), then the reply's beginning (its whole size
    /// noted).
    fn keep_within_limit(&self, record: &mut ModelRecord, request_len: usize) {
        let mut recorded = self.recorded.lock().unwrap_or_else(|e| e.into_inner());
        if request_len > MAX_RUN_RECORD.saturating_sub(*recorded) {
            record.request = Value::String(format!("[not recorded: {request_len} bytes, past the run's model record limit of {MAX_RUN_RECORD} bytes]"));
            record.request_bytes = Some(request_len as u64);
        } else {
            *recorded += request_len;
        }
        keep_reply(&mut record.reply, &mut record.reply_bytes, &mut *recorded);
        // A bridged call's provider side counts against the same limit.
        if let Some(side) = record.bridged.as_deref_mut() {
            let request = side.request.to_string().len();
            if request > MAX_RUN_RECORD.saturating_sub(*recorded) {
                side.request = Value::String(format!("[not recorded: {request} bytes, past the run's model record limit of {MAX_RUN_RECORD} bytes]"));
            } else {
                *recorded += request;
            }
            keep_reply(&mut side.reply, &mut side.reply_bytes, &mut *recorded);
        }
    }

    /// Serves one agent connection, request after request, until either side closes it.
    fn serve(&self, agent: TcpStream) {
        let _ = agent.set_nodelay(true);
        let _ = agent.set_read_timeout(Some(READ_TIMEOUT));
        let Ok(write_half) = agent.try_clone() else { return };
        let mut r = BufReader::new(agent);
        let mut w = write_half;
        while let Ok(head) = http::read_head(&mut r) {
            let Ok(body) = http::read_body(&mut r, &head) else {
                let _ = respond_error(&mut w, 400, "the request's body could not be read");
                return;
            };
            let close = http::header(&head, "connection").is_some_and(|v| v.eq_ignore_ascii_case("close")) || head[0].ends_with("HTTP/1.0");
            if !self.exchange(&head, &body, &mut w) || close {
                return;
            }
        }
    }

    /// Forwards one request and relays its reply; false when the agent's connection is no
    /// longer usable.
    fn exchange(&self, head: &[String], body: &[u8], agent: &mut TcpStream) -> bool {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        let kept = self.relay_one(head, body, agent);
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        kept
    }

    /// Ends this process once no call is being relayed or recorded (waiting at most
    /// `limit`): every call the agent made is then in the model channel.
    fn exit_when_idle(&self, limit: Duration) -> ! {
        let deadline = Instant::now() + limit;
        while self.in_flight.load(Ordering::SeqCst) > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(2));
        }
        self.record_pending();
        std::process::exit(0)
    }

    /// Records every call still unanswered, with what arrived of its reply: nothing the
    /// provider was asked is lost when the run ends first.
    fn record_pending(&self) {
        let pending = std::mem::take(&mut *self.pending.lock().unwrap_or_else(|e| e.into_inner()));
        for (_, p) in pending {
            let mut record = p.record;
            let received = p.reply.lock().unwrap_or_else(|e| e.into_inner());
            received.fill(&mut record);
            record.duration_us = Some(p.started.elapsed().as_micros() as u64);
            record.failure = Some(in_flight_failure(p.started.elapsed(), &received));
            drop(received);
            self.record(&mut record, &p.request);
        }
    }

    /// Takes the call off the pending list; false when it was recorded as in flight already.
    fn settle(&self, seq: u64) -> bool {
        self.pending.lock().unwrap_or_else(|e| e.into_inner()).remove(&seq).is_some()
    }

    /// The request to send the provider: the agent's, with its headers less those the gateway
    /// sets; a bridged call's in the provider's dialect, with only the headers that dialect
    /// needs.
    fn upstream_request(&self, method: &str, path: &str, head: &[String], body: &[u8], bridged: bool) -> Vec<u8> {
        let mut out = format!("{method} {} HTTP/1.1\r\nHost: {}\r\n", self.upstream_path(path), self.upstream.authority()).into_bytes();
        for line in &head[1..] {
            let name = line.split(':').next().unwrap_or("").trim().to_ascii_lowercase();
            // A translated call keeps none of the agent's dialect's own headers.
            let foreign = bridged && name != "user-agent";
            if !DROPPED_REQUEST_HEADERS.contains(&name.as_str()) && !foreign {
                out.extend_from_slice(line.as_bytes());
                out.extend_from_slice(b"\r\n");
            }
        }
        if bridged {
            out.extend_from_slice(b"Content-Type: application/json\r\n");
            if self.dialects.provider == Dialect::Anthropic {
                out.extend_from_slice(b"anthropic-version: 2023-06-01\r\n");
            }
        }
        if let Some(key) = &self.key {
            out.extend_from_slice(self.auth.header(key).as_bytes());
        }
        out.extend_from_slice(format!("Accept-Encoding: identity\r\nContent-Length: {}\r\nConnection: keep-alive\r\n\r\n", body.len()).as_bytes());
        out.extend_from_slice(body);
        out
    }

    /// Answers a call the bridge cannot carry with a 400 in the agent's dialect, recording it
    /// as a failure of the model API that names what was not carried.
    fn refuse(&self, mut record: ModelRecord, body: &[u8], refused: overeager_bridge::CannotCarry, t0: Instant, agent: &mut TcpStream) -> bool {
        let (from, to) = (self.dialects.agent.unwrap_or(self.dialects.provider), self.dialects.provider);
        let message = format!("overeager's dialect bridge cannot carry this call from {} to {}: {refused}", from.as_str(), to.as_str());
        record.status = 400;
        record.content_type = "application/json".into();
        record.reply = overeager_bridge::error_body(from, 400, &message);
        record.failure = Some(format!("bridge: {refused}"));
        record.bridged = Some(Box::new(ProviderSide { dialect: to, path: String::new(), request: Value::Null, content_type: String::new(), reply: String::new(), reply_bytes: None, dropped: Vec::new(), changed: Vec::new() }));
        record.duration_us = Some(t0.elapsed().as_micros() as u64);
        let reply = record.reply.clone();
        if self.settle(record.seq) {
            self.record(&mut record, body);
        }
        let head = format!("HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n", reply.len());
        agent.write_all(head.as_bytes()).and_then(|()| agent.write_all(reply.as_bytes())).and_then(|()| agent.flush()).is_ok()
    }

    fn relay_one(&self, head: &[String], body: &[u8], agent: &mut TcpStream) -> bool {
        let t0 = Instant::now();
        let t_us = now_us();
        let mut parts = head[0].split_whitespace();
        let (method, path) = (parts.next().unwrap_or("").to_string(), parts.next().unwrap_or("").to_string());
        // The request is read for the record only once its reply has been relayed: parsing a
        // long conversation first would delay every call.
        let mut record = ModelRecord { seq: self.seq.fetch_add(1, Ordering::SeqCst), t_us, method: method.clone(), path: path.clone(), upstream: Some(self.upstream.host.clone()), ..Default::default() };
        let seq = record.seq;
        let received = Arc::new(Mutex::new(Received::default()));
        self.pending.lock().unwrap_or_else(|e| e.into_inner()).insert(seq, Pending { record: record.clone(), request: body.to_vec(), started: t0, reply: received.clone() });
        let call = match self.dialects.plan(&method, &path, body, seq) {
            Some(Err(refused)) => return self.refuse(record, body, refused, t0, agent),
            Some(Ok(call)) => Some(call),
            None => None,
        };
        let translated = call.as_ref().map(|c| c.body.to_string().into_bytes());
        let out = match (&call, &translated) {
            (Some(c), Some(b)) => self.upstream_request(&method, &c.path, head, b, self.dialects.agent.is_some()),
            _ => self.upstream_request(&method, &path, head, body, false),
        };
        let (mut up, sent, connecting, reply) = match self.send(&out, method == "HEAD") {
            Ok(x) => x,
            Err(failure) => {
                let message = format!("the model gateway could not reach {}: {failure}", self.upstream.host);
                record.status = 502;
                record.content_type = "application/json".into();
                record.reply = match &call {
                    Some(c) => overeager_bridge::error_body(c.agent, 502, &message),
                    None => error_body(&message),
                };
                record.failure = Some(failure);
                record.relay_us = Some(t0.elapsed().as_micros() as u64);
                record.duration_us = record.relay_us;
                let reply = record.reply.clone();
                if self.settle(seq) {
                    self.record(&mut record, body);
                }
                return respond(agent, 502, &reply).is_ok();
            }
        };
        let sent = sent.duration_since(t0).saturating_sub(connecting);
        let ctype = reply.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case("content-type")).map(|(_, v)| v.clone()).unwrap_or_default();
        let translator = call.as_ref().map(|c| overeager_bridge::ReplyTranslator::new(c, reply.status, &ctype));
        record.status = reply.status;
        record.stand_in = reply.headers.iter().any(|(k, _)| k.eq_ignore_ascii_case(overeager_core::model::STAND_IN_HEADER));
        record.content_type = translator.as_ref().map_or(ctype.clone(), |t| t.content_type().to_string());
        if let Some(p) = self.pending.lock().unwrap_or_else(|e| e.into_inner()).get_mut(&seq) {
            p.record.status = reply.status;
            p.record.content_type = record.content_type.clone();
        }
        let mut head_out = format!("HTTP/1.1 {} {}\r\n", reply.status, reply.reason);
        for (k, v) in &reply.headers {
            let k_lower = k.to_ascii_lowercase();
            // A translated reply has the agent's dialect's type, and its own length.
            let replaced = translator.is_some() && matches!(k_lower.as_str(), "content-type" | "content-length");
            if !DROPPED_REPLY_HEADERS.contains(&k_lower.as_str()) && !replaced {
                head_out.push_str(&format!("{k}: {v}\r\n"));
            }
        }
        let chunked = translator.is_some() || matches!(reply.framing, Framing::Chunked | Framing::UntilClose);
        match (&translator, reply.framing) {
            (Some(t), Framing::None) => head_out.push_str(&format!("Content-Type: {}\r\nContent-Length: 0\r\n", t.content_type())),
            (Some(t), _) => head_out.push_str(&format!("Content-Type: {}\r\nTransfer-Encoding: chunked\r\n", t.content_type())),
            (None, Framing::None) => head_out.push_str("Content-Length: 0\r\n"),
            (None, Framing::Length(n)) => head_out.push_str(&format!("Content-Length: {n}\r\n")),
            (None, Framing::Chunked | Framing::UntilClose) => head_out.push_str("Transfer-Encoding: chunked\r\n"),
        }
        head_out.push_str("\r\n");
        let head_in = Instant::now();
        let agent_ok = agent.write_all(head_out.as_bytes()).and_then(|()| agent.flush()).is_ok();
        let head_relay = head_in.elapsed();
        let bridge = translator.map(|t| (t, Received::default()));
        let mut relay = Relay { agent, agent_ok, chunked: chunked && reply.framing != Framing::None, received, first: None, bridge };
        let relayed = relay.body(&mut up, reply.framing);
        if relayed.is_ok() {
            relay.finish();
        }
        let agent_ok = relay.agent_ok;
        record.relay_us = Some((sent + head_relay + relay.first.unwrap_or_default()).as_micros() as u64);
        relay.received.lock().unwrap_or_else(|e| e.into_inner()).fill(&mut record);
        record.duration_us = Some(t0.elapsed().as_micros() as u64);
        // The provider's side: what it was asked and what it sent, in its own dialect.
        if let (Some(c), Some((_, provider))) = (&call, &relay.bridge) {
            let mut side = ModelRecord::default();
            provider.fill(&mut side);
            record.bridged = Some(Box::new(ProviderSide {
                dialect: c.provider,
                path: self.upstream_path(&c.path),
                request: c.body.clone(),
                content_type: ctype.clone(),
                reply: side.reply,
                reply_bytes: side.reply_bytes,
                dropped: c.dropped.clone(),
                changed: c.changed.clone(),
            }));
        }
        let (_, provider_type, provider_reply) = record.provider_reply();
        let provider_path = record.bridged.as_ref().map_or(path.as_str(), |b| b.path.as_str());
        let cut_in_record = record.bridged.as_ref().map_or(record.reply_bytes, |b| b.reply_bytes).is_some();
        record.failure = failure(relayed, reply.status, provider_type, provider_reply, provider_path, cut_in_record)
            .or_else(|| record.bridged.as_ref().and_then(|_| upstream_error(&record.reply)).map(|words| format!("bridge: {words}")));
        if self.settle(seq) {
            self.record(&mut record, body);
        }
        if relayed.is_ok() && reply.reusable && agent_ok {
            self.idle.lock().unwrap_or_else(|e| e.into_inner()).push(up);
        }
        agent_ok && relayed.is_ok()
    }
}

/// How the provider's API failed on a call, from its reply (`relayed`: how far the body came),
/// with the provider's own words where it sent any; `None` for a call that went well.
fn failure(relayed: Result<(), usize>, status: u16, content_type: &str, reply: &str, path: &str, cut_in_record: bool) -> Option<String> {
    let words = || upstream_error(reply).map(|m| format!(": {m}")).unwrap_or_default();
    let stream = content_type.contains("event-stream");
    match relayed {
        Err(n) => Some(format!("reply cut short after {n} bytes{}", words())),
        Ok(()) if status >= 400 => Some(format!("http {status}{}", words())),
        Ok(()) if stream && (has_error_event(reply) || upstream_error(reply).is_some()) => Some(format!("error event in the stream{}", words())),
        // A Chat Completions stream ends with `data: [DONE]`; one that stops before it (a
        // server that failed mid-stream and closed it, having sent only keep-alives) gave
        // the agent no whole answer.
        Ok(()) if stream && path.contains("/chat/completions") && !cut_in_record && !reply.lines().any(|l| l.trim() == "data: [DONE]") => {
            Some(format!("the stream ended before its end (`data: [DONE]`) after {} bytes", reply.len()))
        }
        Ok(()) => None,
    }
}

/// Cuts `reply` to the room left in the run's model record (noting its whole size in `bytes`),
/// and counts what it keeps.
fn keep_reply(reply: &mut String, bytes: &mut Option<u64>, recorded: &mut usize) {
    let room = MAX_RUN_RECORD.saturating_sub(*recorded);
    if reply.len() > room {
        let whole = bytes.unwrap_or(reply.len() as u64);
        let mut cut = room;
        while !reply.is_char_boundary(cut) {
            cut -= 1;
        }
        reply.truncate(cut);
        *bytes = Some(whole);
    }
    *recorded += reply.len();
}

/// Writes `request` on `conn`; when it was sent.
fn send_on(conn: &mut UpConn, request: &[u8]) -> Result<Instant, String> {
    conn.get_mut().write_all(request).and_then(|()| conn.get_mut().flush()).map_err(|e| format!("connection dropped before the reply: {e}"))?;
    Ok(Instant::now())
}

/// The reply's head; `head_only` for the reply to a `HEAD` request, which has no body whatever
/// its `Content-Length` says.
fn read_reply_head(conn: &mut UpConn, head_only: bool) -> Result<ReplyHead, String> {
    loop {
        let lines = http::read_head(conn).map_err(|e| format!("connection dropped before the reply: {e}"))?;
        let mut status_line = lines[0].splitn(3, ' ');
        let version = status_line.next().unwrap_or("");
        let status: u16 = status_line.next().and_then(|s| s.parse().ok()).ok_or_else(|| format!("not an HTTP reply: `{}`", lines[0]))?;
        let reason = status_line.next().unwrap_or("").to_string();
        if (100..200).contains(&status) {
            // An interim reply (100 Continue): the real one follows.
            continue;
        }
        let headers: Vec<(String, String)> = lines[1..].iter().filter_map(|l| l.split_once(':')).map(|(k, v)| (k.trim().to_string(), v.trim().to_string())).collect();
        let chunked = http::header(&lines, "transfer-encoding").is_some_and(|v| v.to_ascii_lowercase().contains("chunked"));
        let length = http::header(&lines, "content-length").and_then(|v| v.parse::<u64>().ok());
        let framing = if head_only || status == 204 || status == 304 {
            Framing::None
        } else if chunked {
            Framing::Chunked
        } else if let Some(n) = length {
            Framing::Length(n)
        } else {
            Framing::UntilClose
        };
        let closes = http::header(&lines, "connection").is_some_and(|v| v.eq_ignore_ascii_case("close")) || version == "HTTP/1.0";
        return Ok(ReplyHead { status, reason, headers, framing, reusable: !closes && framing != Framing::UntilClose });
    }
}

/// The agent's side of relaying one reply: what was passed on, what is kept for the record.
struct Relay<'a> {
    agent: &'a mut TcpStream,
    /// Whether the agent's connection still takes writes (it may hang up mid-reply; the body
    /// is then still read to its end, for the record).
    agent_ok: bool,
    /// Re-chunked to the agent (the provider's chunks, or a body that ends with the connection).
    chunked: bool,
    /// What arrived, shared with the pending call's entry.
    received: Arc<Mutex<Received>>,
    /// How long the first piece took from arriving to being passed on.
    first: Option<Duration>,
    /// A bridged call's reply: its translator, and what the provider sent (the agent gets the
    /// translation; `received` keeps that).
    bridge: Option<(overeager_bridge::ReplyTranslator, Received)>,
}

impl Relay<'_> {
    fn pass(&mut self, data: &[u8]) {
        let arrived = Instant::now();
        let translated;
        let data = match &mut self.bridge {
            Some((translator, provider)) => {
                provider.keep(data, arrived);
                translated = translator.push(data);
                translated.as_slice()
            }
            None => data,
        };
        self.write(data);
        self.first.get_or_insert_with(|| arrived.elapsed());
        self.received.lock().unwrap_or_else(|e| e.into_inner()).keep(data, arrived);
    }

    /// Passes `data` on to the agent.
    fn write(&mut self, data: &[u8]) {
        if self.agent_ok && !data.is_empty() {
            let a = &mut *self.agent;
            let written = if self.chunked {
                a.write_all(format!("{:x}\r\n", data.len()).as_bytes()).and_then(|()| a.write_all(data)).and_then(|()| a.write_all(b"\r\n"))
            } else {
                a.write_all(data)
            };
            self.agent_ok = written.and_then(|()| a.flush()).is_ok();
        }
    }

    /// The bytes of the reply the provider has sent so far.
    fn total(&self) -> usize {
        match &self.bridge {
            Some((_, provider)) => provider.total,
            None => self.received.lock().unwrap_or_else(|e| e.into_inner()).total,
        }
    }

    /// The reply ended whole: what a translation holds back goes on, then the end of the chunks.
    fn finish(&mut self) {
        if let Some((translator, _)) = &mut self.bridge {
            let rest = translator.finish();
            self.write(&rest);
            self.received.lock().unwrap_or_else(|e| e.into_inner()).keep(&rest, Instant::now());
        }
        if self.chunked && self.agent_ok {
            self.agent_ok = self.agent.write_all(b"0\r\n\r\n").and_then(|()| self.agent.flush()).is_ok();
        }
    }

    /// Passes on up to `left` bytes as they arrive; false if the provider's side ended first.
    fn pass_exactly(&mut self, up: &mut UpConn, mut left: usize) -> bool {
        while left > 0 {
            let buf = match up.fill_buf() {
                Ok(b) if !b.is_empty() => b,
                _ => return false,
            };
            let take = buf.len().min(left);
            self.pass(&buf[..take]);
            up.consume(take);
            left -= take;
        }
        true
    }

    /// Relays the reply's body as it arrives. `Err(n)`: the provider's side ended after `n`
    /// bytes, before the body was whole.
    fn body(&mut self, up: &mut UpConn, framing: Framing) -> Result<(), usize> {
        match framing {
            Framing::None => Ok(()),
            Framing::Length(n) => if self.pass_exactly(up, n as usize) { Ok(()) } else { Err(self.total()) },
            Framing::UntilClose => loop {
                let buf = up.fill_buf().map_err(|_| self.total())?;
                if buf.is_empty() {
                    return Ok(());
                }
                let n = buf.len();
                self.pass(buf);
                up.consume(n);
            },
            Framing::Chunked => loop {
                let mut size_line = String::new();
                if up.read_line(&mut size_line).unwrap_or(0) == 0 {
                    return Err(self.total());
                }
                let size = usize::from_str_radix(size_line.trim().split(';').next().unwrap_or(""), 16).map_err(|_| self.total())?;
                if size == 0 {
                    // Trailers, up to the blank line.
                    loop {
                        let mut t = String::new();
                        if up.read_line(&mut t).unwrap_or(0) == 0 || t.trim().is_empty() {
                            break;
                        }
                    }
                    return Ok(());
                }
                if !self.pass_exactly(up, size) {
                    return Err(self.total());
                }
                let mut crlf = [0u8; 2];
                up.read_exact(&mut crlf).map_err(|_| self.total())?;
            },
        }
    }
}

/// On SIGTERM, records what is in flight (waiting two seconds for it first) and exits. The
/// handler only writes to a pipe, which a thread of its own waits on.
fn record_on_term(gateway: Arc<Gateway>) {
    use std::os::fd::FromRawFd;
    static TERM_PIPE: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(-1);
    extern "C" fn on_term(_: libc::c_int) {
        let fd = TERM_PIPE.load(Ordering::Relaxed);
        if fd >= 0 {
            // SAFETY: write(2) is async-signal-safe; the buffer is a static byte.
            unsafe { libc::write(fd, b"t".as_ptr().cast(), 1) };
        }
    }
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: pipe(2) fills the two descriptors of a valid array.
    if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
        return;
    }
    TERM_PIPE.store(fds[1], Ordering::Relaxed);
    // SAFETY: the handler is async-signal-safe (see above).
    unsafe { libc::signal(libc::SIGTERM, on_term as *const () as libc::sighandler_t) };
    std::thread::spawn(move || {
        // SAFETY: the read end is this thread's alone from here on.
        let mut read_end = unsafe { std::fs::File::from_raw_fd(fds[0]) };
        if read_end.read(&mut [0u8; 1]).is_ok() {
            gateway.exit_when_idle(Duration::from_secs(2));
        }
    });
}

/// Whether a streamed reply carries an error event (Anthropic's `event: error`, the Responses
/// API's `response.failed`).
fn has_error_event(sse: &str) -> bool {
    sse.lines().any(|l| matches!(l.trim(), "event: error" | "event: response.failed"))
}

/// A query without its `key=` parameter (Gemini clients may send their key there).
fn strip_key_param(path_and_query: &str) -> String {
    let Some((path, query)) = path_and_query.split_once('?') else { return path_and_query.to_string() };
    let kept: Vec<&str> = query.split('&').filter(|p| !p.starts_with("key=")).collect();
    if kept.is_empty() { path.to_string() } else { format!("{path}?{}", kept.join("&")) }
}

fn error_body(message: &str) -> String {
    serde_json::json!({"type": "error", "error": {"type": "gateway_error", "message": message}}).to_string()
}

fn respond_error(w: &mut TcpStream, status: u16, message: &str) -> std::io::Result<()> {
    respond(w, status, &error_body(message))
}

/// Answers with `status` and the JSON `body`.
fn respond(w: &mut TcpStream, status: u16, body: &str) -> std::io::Result<()> {
    let head = format!("HTTP/1.1 {status} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n", http::reason(status), body.len());
    w.write_all(head.as_bytes()).and_then(|()| w.write_all(body.as_bytes())).and_then(|()| w.flush())
}

/// Makes this process non-dumpable and reads the key: the first line of standard input
/// (`stdin`), or the variable `var`, then removed from the environment.
fn take_key(stdin: bool, var: Option<&str>) -> Result<Option<String>, String> {
    // SAFETY: prctl with these arguments only changes this process's dumpable flag.
    if unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) } != 0 {
        return Err(format!("cannot make the gateway non-dumpable: {}", std::io::Error::last_os_error()));
    }
    if stdin {
        let mut line = String::new();
        std::io::stdin().read_line(&mut line).map_err(|e| format!("reading the key from standard input: {e}"))?;
        let key = line.trim_end_matches(['\r', '\n']).to_string();
        return if key.is_empty() { Err("--key-stdin: standard input held no key".into()) } else { Ok(Some(key)) };
    }
    let Some(var) = var else { return Ok(None) };
    let key = std::env::var(var).ok().filter(|k| !k.is_empty()).ok_or_else(|| format!("the key variable {var} is not set"))?;
    // Out of the block /proc/<pid>/environ shows too: another process on the machine (root
    // on a Docker host, say) could read it there.
    overeager_process::wipe_env_value(var);
    // SAFETY: called before any thread starts, so nothing reads the environment concurrently.
    unsafe { std::env::remove_var(var) };
    Ok(Some(key))
}

/// `overeager-shim gateway --upstream <url> --dialect <d> [--agent-dialect <d>] [--max-output-tokens <n>] (--listen <addr> | --fd <n>)
/// [--prefix /v1] [--key-stdin | --key-env VAR] [--ca <pem> | --ca-env VAR] [--log <model.jsonl>]
/// [--until-stdin-closes]`: serve until killed, or with `--until-stdin-closes` until standard
/// input ends, then finish the calls in flight.
pub fn main(args: &[String]) -> i32 {
    let run = || -> Result<(), String> {
        let upstream = Upstream::parse(flag(args, "--upstream").ok_or("--upstream <url> is required")?)?;
        let provider = flag(args, "--dialect").ok_or("--dialect <anthropic|openai-chat|openai-responses|gemini> is required")?;
        let auth = Auth::parse(provider)?;
        let provider = dialect_named(provider).map_err(|e| format!("--dialect: {e}"))?;
        let agent = flag(args, "--agent-dialect").map(dialect_named).transpose().map_err(|e| format!("--agent-dialect: {e}"))?;
        let max_output = flag(args, "--max-output-tokens").map(|n| n.parse::<u64>().map_err(|_| format!("--max-output-tokens `{n}` is not a number of tokens"))).transpose()?;
        let dialects = Dialects { provider, agent: agent.filter(|a| *a != provider), max_output };
        let key = take_key(args.iter().any(|a| a == "--key-stdin"), flag(args, "--key-env"))?;
        // The extra authority: a file, or PEM text in a variable (a container whose root is
        // read-only gets it through its environment).
        let ca = match (flag(args, "--ca"), flag(args, "--ca-env")) {
            (Some(path), _) => Some((crate::tls::read(path, "certificate authority file")?, path.to_string())),
            (None, Some(var)) => Some((std::env::var(var).map_err(|_| format!("--ca-env: {var} is not set"))?.into_bytes(), format!("${var}"))),
            (None, None) => None,
        };
        let tls = if upstream.tls { Some(crate::tls::client(ca.as_ref().map(|(pem, from)| (pem.as_slice(), from.as_str())))?) } else { None };
        let listener: TcpListener = crate::model::listener(flag(args, "--fd"), flag(args, "--listen"))?;
        // `-`: standard output (a sidecar's records come back as its container's output).
        let log: Option<Box<dyn Write + Send>> = match flag(args, "--log") {
            Some("-") => Some(Box::new(std::io::stdout())),
            Some(p) => Some(Box::new(std::fs::OpenOptions::new().create(true).append(true).open(p).map_err(|e| format!("opening {p}: {e}"))?)),
            None => None,
        };
        let gateway = Gateway::new(upstream, flag(args, "--prefix").unwrap_or(""), auth, key, tls, log, args.iter().any(|a| a == "--text-replies"), dialects);
        if let Ok(a) = listener.local_addr() {
            // On standard error: the records may go to standard output.
            eprintln!("overeager model gateway: listening on http://{a}");
        }
        // A sidecar is stopped with SIGTERM: what is in flight is recorded first.
        record_on_term(gateway.clone());
        if args.iter().any(|a| a == "--until-stdin-closes") {
            // The run's supervisor holds the other end: closing it asks for a clean stop.
            let g = gateway.clone();
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut std::io::stdin(), &mut std::io::sink());
                g.exit_when_idle(Duration::from_secs(5))
            });
        }
        gateway.serve_all(listener);
        Ok(())
    };
    match run() {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("overeager-shim gateway: {e}");
            2
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use overeager_core::Step;
    use std::fs::File;
    use overeager_formats::model::Script;
    use overeager_core::paths::Roots;
    use std::sync::mpsc;

    /// A test certificate authority and a certificate it issued for `localhost` and
    /// 127.0.0.1, as PEM files in `dir`: (ca, cert, key).
    fn test_ca(dir: &std::path::Path) -> (String, String, String) {
        use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
        let ca_key = KeyPair::generate().unwrap();
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca_cert = ca_params.self_signed(&ca_key).unwrap();
        let issuer = Issuer::new(ca_params, ca_key);
        let leaf_key = KeyPair::generate().unwrap();
        let leaf = CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap().signed_by(&leaf_key, &issuer).unwrap();
        let path = |n: &str, text: String| {
            let p = dir.join(n);
            std::fs::write(&p, text).unwrap();
            p.to_string_lossy().into_owned()
        };
        (path("ca.pem", ca_cert.pem()), path("cert.pem", leaf.pem()), path("key.pem", leaf_key.serialize_pem()))
    }

    const CHAT: Dialects = Dialects { provider: Dialect::Chat, agent: None, max_output: None };

    fn script() -> Script {
        Script { label: "cautious".into(), steps: vec![Step::Sh { command: "ls -la".into() }], roots: Roots { workspace: "/w".into(), home: "/h".into() }, default_shell: "Bash".into(), tools: Default::default(), replay: None, first_delay_ms: 0, learn_roots: false, finish_command: None, reply_format: None }
    }

    /// A gateway on a loopback port in front of `upstream`, recording to `log`.
    fn gateway(upstream: &str, dialect: &str, key: Option<&str>, ca: Option<&str>, log: &std::path::Path) -> String {
        let up = Upstream::parse(upstream).unwrap();
        let pem = ca.map(|c| std::fs::read(c).unwrap());
        let tls = up.tls.then(|| crate::tls::client(pem.as_deref().map(|p| (p, "ca.pem"))).unwrap());
        let prefix = if dialect.starts_with("openai") { "/v1" } else { "" };
        let dialects = Dialects { provider: dialect_named(dialect).unwrap(), agent: None, max_output: None };
        let g = Gateway::new(up, prefix, Auth::parse(dialect).unwrap(), key.map(str::to_string), tls, Some(Box::new(File::create(log).unwrap())), false, dialects);
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        std::thread::spawn(move || g.serve_all(l));
        addr
    }

    /// One request on a new connection; the whole reply (status, head, de-chunked body).
    fn call(addr: &str, path: &str, headers: &str, body: &str) -> (u16, String, String) {
        let mut s = TcpStream::connect(addr).unwrap();
        write!(s, "POST {path} HTTP/1.1\r\nHost: {addr}\r\n{headers}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len()).unwrap();
        let mut r = BufReader::new(s);
        let head = http::read_head(&mut r).unwrap();
        let status = head[0][9..12].parse().unwrap();
        let body = http::read_body(&mut r, &head).unwrap_or_default();
        (status, head.join("\n"), String::from_utf8(body).unwrap())
    }

    /// The records of `log` once there are `n` (a record is written once its reply has been
    /// passed on, so just after the agent has it).
    fn records(log: &std::path::Path, n: usize) -> Vec<ModelRecord> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            // Whole lines only: a long record may be half written.
            let text = std::fs::read_to_string(log).unwrap();
            let r: Vec<ModelRecord> = text.split_inclusive('\n').filter(|l| l.ends_with('\n')).map(|l| serde_json::from_str(l).unwrap()).collect();
            if r.len() >= n || Instant::now() > deadline {
                return r;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn forwards_over_tls_to_a_trusted_provider_and_records_every_call() {
        let dir = tempfile::tempdir().unwrap();
        let (ca, cert, key) = test_ca(dir.path());
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let provider = format!("https://localhost:{}", l.local_addr().unwrap().port());
        let serving = crate::model::Serving { tls: Some(crate::tls::server(&cert, &key).unwrap()), fail_from: Some((2, 503)) };
        crate::model::spawn_with(l, crate::model::Plays::Script(script()), None, serving);
        let log = dir.path().join("model.jsonl");
        let gw = gateway(&provider, "anthropic", Some("sk-test-real"), Some(&ca), &log);
        let tools = r#"[{"name": "Bash", "input_schema": {"properties": {"command": {}}}}]"#;
        let body = format!(r#"{{"model": "m", "tools": {tools}, "messages": [{{"role": "user", "content": "go"}}]}}"#);
        let (status, _, reply) = call(&gw, "/v1/messages", "x-api-key: placeholder\r\n", &body);
        assert_eq!(status, 200, "{reply}");
        assert!(reply.contains("ls -la"), "the provider's answer comes back: {reply}");
        let stream = body.replace(r#""model": "m""#, r#""model": "m", "stream": true"#);
        let (status, head, reply) = call(&gw, "/v1/messages", "", &stream);
        assert_eq!(status, 200);
        assert!(head.to_ascii_lowercase().contains("text/event-stream") && reply.contains("event: message_stop"), "{head}\n{reply}");
        // The provider goes down: its status comes back and the record classifies it.
        let (status, _, _) = call(&gw, "/v1/messages", "", &body);
        assert_eq!(status, 503);
        let r = records(&log, 3);
        assert_eq!(r.len(), 3);
        assert_eq!((r[0].step, r[0].side, r[0].status, r[0].upstream.as_deref(), r[0].failure.as_deref()), (Some(0), false, 200, Some("localhost"), None));
        assert!(r[1].reply.contains("event: message_stop") && r[1].relay_us.is_some());
        // With the provider's own words after the class.
        assert_eq!((r[2].status, r[2].failure.as_deref()), (503, Some("http 503: the scripted provider is down from request 2 on (request 2)")));
        // A provider whose certificate no trusted authority issued is refused.
        let untrusted = dir.path().join("untrusted.jsonl");
        let gw = gateway(&provider, "anthropic", None, None, &untrusted);
        let (status, _, reply) = call(&gw, "/v1/messages", "", &body);
        assert_eq!(status, 502, "{reply}");
        let r = records(&untrusted, 1);
        assert!(r[0].failure.as_deref().is_some_and(|f| f.starts_with("connection dropped before the reply") || f.starts_with("no connection")), "{:?}", r[0].failure);
    }

    #[test]
    fn an_agent_without_tools_asks_its_main_loop_without_tools() {
        // Aider's requests declare no tools: with --text-replies they are the main loop, turn by
        // turn; without, side requests.
        let dir = tempfile::tempdir().unwrap();
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let provider = format!("http://127.0.0.1:{}/v1", l.local_addr().unwrap().port());
        let text = Script { reply_format: Some(overeager_formats::model::text::ReplyFormat::SearchReplace), ..script() };
        crate::model::spawn_with(l, crate::model::Plays::Script(text), None, crate::model::Serving { tls: None, fail_from: None });
        let body = r#"{"model": "m", "messages": [{"role": "system", "content": "edit blocks"}, {"role": "user", "content": "go"}]}"#;
        for (text_replies, expect) in [(true, [(false, Some(0)), (false, Some(1))]), (false, [(true, None), (true, None)])] {
            let log = dir.path().join(format!("model-{text_replies}.jsonl"));
            let g = Gateway::new(Upstream::parse(&provider).unwrap(), "/v1", Auth::parse("openai-chat").unwrap(), None, None, Some(Box::new(File::create(&log).unwrap())), text_replies, CHAT);
            let gl = TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = gl.local_addr().unwrap().to_string();
            std::thread::spawn(move || g.serve_all(gl));
            for _ in 0..2 {
                let (status, _, reply) = call(&addr, "/v1/chat/completions", "", body);
                assert_eq!(status, 200, "{reply}");
                assert!(reply.contains("```bash"), "the scripted model answers in the edit format: {reply}");
            }
            let r = records(&log, 2);
            let got: Vec<(bool, Option<usize>)> = r.iter().map(|r| (r.side, r.step)).collect();
            assert_eq!(got, expect, "--text-replies {text_replies}");
        }
    }

    /// A plain-HTTP provider that hands each request's head to the test and answers as the
    /// test's closure says.
    fn provider(answer: impl Fn(&[String], &mut TcpStream) + Send + Sync + 'static) -> (String, mpsc::Receiver<Vec<String>>) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://127.0.0.1:{}/v1", l.local_addr().unwrap().port());
        let (tx, rx) = mpsc::channel();
        let answer = Arc::new(answer);
        std::thread::spawn(move || {
            for conn in l.incoming().flatten() {
                let (tx, answer) = (tx.clone(), answer.clone());
                std::thread::spawn(move || {
                    let mut w = conn.try_clone().unwrap();
                    let mut r = BufReader::new(conn);
                    while let Ok(head) = http::read_head(&mut r) {
                        let _ = http::read_body(&mut r, &head);
                        answer(&head, &mut w);
                        let _ = tx.send(head);
                    }
                });
            }
        });
        (url, rx)
    }

    /// Starts a chunked event stream on `w` and sends its first event, `data: {"n":1}`.
    fn begin_stream(w: &mut TcpStream) {
        write!(w, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n").unwrap();
        let first = "data: {\"n\":1}\n\n";
        write!(w, "{:x}\r\n{first}\r\n", first.len()).unwrap();
        w.flush().unwrap();
    }

    #[test]
    fn the_real_key_replaces_the_placeholder_and_streams_pass_through_unbuffered() {
        let dir = tempfile::tempdir().unwrap();
        let (ack_tx, ack_rx) = mpsc::channel::<()>();
        let ack_rx = Mutex::new(ack_rx);
        let (buffered_tx, buffered_rx) = mpsc::channel::<bool>();
        let (url, heads) = provider(move |head, w| {
            if head[0].contains("/stream") {
                begin_stream(w);
                // The rest is sent only once the agent has the first piece: a gateway that
                // waited for the whole reply would never pass it on.
                let got = ack_rx.lock().unwrap().recv_timeout(Duration::from_secs(20)).is_ok();
                buffered_tx.send(!got).unwrap();
                let rest = "data: {\"n\":2}\n\n";
                write!(w, "{:x}\r\n{rest}\r\n0\r\n\r\n", rest.len()).unwrap();
            } else if head[0].contains("/cut") {
                write!(w, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"partial\":").unwrap();
                let _ = w.shutdown(std::net::Shutdown::Both);
            } else {
                write!(w, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{{}}").unwrap();
            }
            w.flush().unwrap();
        });
        let log = dir.path().join("model.jsonl");
        let gw = gateway(&url, "openai-chat", Some("sk-test-real"), None, &log);
        let (status, _, _) = call(&gw, "/v1/chat/completions", "Authorization: Bearer placeholder\r\nX-Other: kept\r\n", "{}");
        assert_eq!(status, 200);
        let head = heads.recv().unwrap();
        assert!(head[0].starts_with("POST /v1/chat/completions "), "the agent's /v1 maps onto the provider's base path: {}", head[0]);
        let lower: Vec<String> = head.iter().map(|h| h.to_ascii_lowercase()).collect();
        assert!(lower.contains(&"authorization: bearer sk-test-real".to_string()), "{head:?}");
        assert!(!lower.iter().any(|h| h.contains("placeholder")), "the agent's placeholder key is not passed on: {head:?}");
        assert!(lower.contains(&"x-other: kept".to_string()) && lower.contains(&"accept-encoding: identity".to_string()), "{head:?}");
        // Streaming: the first event reaches the agent while the provider still holds the rest.
        let mut s = TcpStream::connect(&gw).unwrap();
        write!(s, "POST /v1/stream HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{{}}").unwrap();
        let mut r = BufReader::new(s);
        let head = http::read_head(&mut r).unwrap();
        assert!(head.iter().any(|h| h.eq_ignore_ascii_case("transfer-encoding: chunked")), "{head:?}");
        let mut size = String::new();
        r.read_line(&mut size).unwrap();
        let mut first = vec![0u8; usize::from_str_radix(size.trim(), 16).unwrap()];
        r.read_exact(&mut first).unwrap();
        assert_eq!(first, b"data: {\"n\":1}\n\n");
        ack_tx.send(()).unwrap();
        assert!(!buffered_rx.recv().unwrap(), "the gateway passed the first event on before the reply ended");
        let mut rest = Vec::new();
        r.read_to_end(&mut rest).unwrap();
        assert!(String::from_utf8_lossy(&rest).contains("data: {\"n\":2}"));
        // A reply cut short is passed on as far as it came, and classified.
        let mut s = TcpStream::connect(&gw).unwrap();
        write!(s, "POST /v1/cut HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{{}}").unwrap();
        let mut got = Vec::new();
        let _ = s.read_to_end(&mut got);
        let r = records(&log, 3);
        assert_eq!(r.len(), 3, "{r:?}");
        assert_eq!(r[1].reply, "data: {\"n\":1}\n\ndata: {\"n\":2}\n\n", "the record holds the whole stream");
        assert_eq!(r[2].failure.as_deref(), Some("reply cut short after 11 bytes"));
        assert!(r.iter().all(|x| !serde_json::to_string(x).unwrap().contains("sk-test-real")), "no key in the record");
    }

    /// The run ends while two calls are unanswered (one mid-stream, one before any reply): both
    /// are recorded, with what arrived, and not again when their replies end later. A
    /// provider's own error text follows the failure's class.
    #[test]
    fn calls_in_flight_at_the_run_s_end_are_recorded_with_what_arrived() {
        let dir = tempfile::tempdir().unwrap();
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let release_rx = Mutex::new(release_rx);
        let (url, _heads) = provider(move |head, w| {
            if head[0].contains("/slow") {
                begin_stream(w);
                let _ = release_rx.lock().unwrap().recv_timeout(Duration::from_secs(30));
                write!(w, "0\r\n\r\n").unwrap();
            } else if head[0].contains("/never") {
                std::thread::sleep(Duration::from_secs(3));
                write!(w, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{{}}").unwrap();
            } else if head[0].contains("/pings") {
                let body = ": ping - 2026-11-29 13:20:26\n\n: ping - 2026-11-29 13:20:41\n\n";
                write!(w, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: {}\r\n\r\n{body}", body.len()).unwrap();
            } else if head[0].contains("/refused") {
                let body = r#"{"error":{"message":"Automatic streaming tool choice is not supported","type":"server_error"}}"#;
                write!(w, "HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}", body.len()).unwrap();
            } else {
                let body = "data: {\"error\": {\"message\": \"the model failed mid-stream\"}}\n\n";
                write!(w, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: {}\r\n\r\n{body}", body.len()).unwrap();
            }
            w.flush().unwrap();
        });
        let log = dir.path().join("model.jsonl");
        let g = Gateway::new(Upstream::parse(&url).unwrap(), "/v1", Auth::parse("openai-chat").unwrap(), None, None, Some(Box::new(File::create(&log).unwrap())), false, CHAT);
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let gw = l.local_addr().unwrap().to_string();
        let serving = g.clone();
        std::thread::spawn(move || serving.serve_all(l));
        for path in ["/v1/slow", "/v1/never"] {
            let gw = gw.clone();
            std::thread::spawn(move || call(&gw, path, "", "{\"messages\": []}"));
        }
        // Both unanswered, the stream's first piece through.
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let p = g.pending.lock().unwrap();
            let streamed = p.values().any(|c| c.reply.lock().unwrap().total > 0);
            if (p.len() == 2 && streamed) || Instant::now() > deadline {
                break;
            }
            drop(p);
            std::thread::sleep(Duration::from_millis(5));
        }
        g.record_pending();
        let r = records(&log, 2);
        let by_path = |p: &str| r.iter().find(|x| x.path == p).unwrap_or_else(|| panic!("{p}: {r:?}"));
        let slow = by_path("/v1/slow");
        assert_eq!((slow.status, slow.reply.as_str()), (200, "data: {\"n\":1}\n\n"));
        let failure = slow.failure.as_deref().unwrap();
        assert!(failure.starts_with("in flight at the run's end after ") && failure.ends_with(", 15 bytes of the reply received"), "{failure}");
        let never = by_path("/v1/never");
        assert_eq!(never.status, 0);
        assert!(never.failure.as_deref().unwrap().ends_with(", no reply yet"), "{never:?}");
        // Their replies end now: nothing is recorded twice.
        release_tx.send(()).unwrap();
        std::thread::sleep(Duration::from_secs(4));
        let (status, _, _) = call(&gw, "/v1/refused", "", "{}");
        assert_eq!(status, 500);
        call(&gw, "/v1/failing", "", "{}");
        // A server that failed inside a stream and closed it having sent only keep-alives.
        call(&gw, "/v1/pings/chat/completions", "", "{}");
        let r = records(&log, 5);
        assert_eq!(r.len(), 5, "{r:?}");
        assert_eq!(r.iter().find(|x| x.path.contains("/pings")).and_then(|x| x.failure.as_deref()), Some("the stream ended before its end (`data: [DONE]`) after 60 bytes"));
        let failure = |p: &str| r.iter().find(|x| x.path == p).and_then(|x| x.failure.clone());
        assert_eq!(failure("/v1/refused").as_deref(), Some("http 500: Automatic streaming tool choice is not supported"));
        assert_eq!(failure("/v1/failing").as_deref(), Some("error event in the stream: the model failed mid-stream"));
        // A reply that began and then went silent is called stalled.
        let quiet = Received { kept: Vec::new(), total: 15, last: Instant::now().checked_sub(Duration::from_secs(12)) };
        assert!(in_flight_failure(Duration::from_secs(20), &quiet).starts_with("stream stalled after 15 bytes: nothing for 12"), "{}", in_flight_failure(Duration::from_secs(20), &quiet));
    }

    /// A provider answering 9 MiB replies (attack: five calls wrote a 336 MB model channel):
    /// each reply's record keeps its first 8 MiB and says how long it was; past 32 MiB a run's
    /// record keeps only what room is left; the agent gets every byte either way.
    #[test]
    fn a_huge_reply_and_a_run_s_many_are_recorded_up_to_their_limits_and_marked() {
        const REPLY: usize = 9 << 20;
        let dir = tempfile::tempdir().unwrap();
        let (url, _heads) = provider(|_, w| {
            write!(w, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {REPLY}\r\n\r\n").unwrap();
            let mut body = vec![b'x'; REPLY];
            body[0] = b'"';
            body[REPLY - 1] = b'"';
            w.write_all(&body).unwrap();
            w.flush().unwrap();
        });
        let log = dir.path().join("model.jsonl");
        let gw = gateway(&url, "openai-chat", None, None, &log);
        for _ in 0..5 {
            let (status, _, body) = call(&gw, "/v1/chat/completions", "", "{\"messages\":[]}");
            assert_eq!((status, body.len()), (200, REPLY), "the agent gets the whole reply");
        }
        let r = records(&log, 5);
        assert_eq!(r.len(), 5);
        // Recorded as each ends, which need not be in the order they began: by size.
        let mut kept: Vec<usize> = r.iter().map(|x| x.reply.len()).collect();
        kept.sort_unstable_by(|a, b| b.cmp(a));
        assert!(r.iter().all(|x| x.reply_bytes == Some(REPLY as u64)), "every record says how long its reply was");
        assert_eq!(&kept[..3], &[MAX_REPLY; 3], "a reply is kept up to its limit");
        let request = "{\"messages\":[]}".len();
        assert_eq!(kept.iter().sum::<usize>() + request * 4, MAX_RUN_RECORD, "the run's record fills up to its limit and stops: {kept:?}");
        let full: Vec<&ModelRecord> = r.iter().filter(|x| x.request_bytes.is_some()).collect();
        assert_eq!(full.len(), 1, "one request came past the limit");
        assert_eq!((full[0].request_bytes, full[0].reply.len()), (Some(request as u64), 0), "noted by its size, with nothing of its reply");
        assert!(full[0].request.as_str().unwrap().starts_with("[not recorded: 15 bytes"), "{:?}", full[0].request);
        assert!(r.iter().all(|x| x.failure.is_none()), "a reply cut in the record is no failure of the call");
    }

    /// A streamed tool-call round trip for every ordered pair of dialects: an agent's request
    /// in one, the stand-in (the scripted model) answering in the other through the bridge, the
    /// agent's reply in its own dialect, the record holding both sides, the provider's tokens
    /// and the stand-in's mark.
    #[test]
    fn every_dialect_reaches_every_other_through_the_bridge() {
        let dir = tempfile::tempdir().unwrap();
        let names = [(Dialect::Anthropic, "anthropic"), (Dialect::Chat, "openai-chat"), (Dialect::Responses, "openai-responses"), (Dialect::Gemini, "gemini")];
        let mut checked = 0;
        for (agent, _) in names {
            for (provider, provider_name) in names.into_iter().filter(|(d, _)| *d != agent) {
                let l = TcpListener::bind("127.0.0.1:0").unwrap();
                let base = format!("http://127.0.0.1:{}{}", l.local_addr().unwrap().port(), if provider_name.starts_with("openai") { "/v1" } else { "" });
                crate::model::spawn_with(l, crate::model::Plays::Script(script()), None, crate::model::Serving::default());
                let log = dir.path().join(format!("{agent:?}-{provider:?}.jsonl"));
                let prefix = if provider_name.starts_with("openai") { "/v1" } else { "" };
                let g = Gateway::new(Upstream::parse(&base).unwrap(), prefix, Auth::parse(provider_name).unwrap(), None, None, Some(Box::new(File::create(&log).unwrap())), false, Dialects { provider, agent: Some(agent), max_output: None });
                let gl = TcpListener::bind("127.0.0.1:0").unwrap();
                let gw = gl.local_addr().unwrap().to_string();
                std::thread::spawn(move || g.serve_all(gl));
                let schema = r#"{"type": "object", "properties": {"command": {"type": "string"}}}"#;
                let (path, body) = match agent {
                    Dialect::Anthropic => ("/v1/messages".to_string(), format!(r#"{{"model": "m", "max_tokens": 99, "stream": true, "tools": [{{"name": "Bash", "input_schema": {schema}}}], "messages": [{{"role": "user", "content": "go"}}]}}"#)),
                    Dialect::Chat => ("/v1/chat/completions".into(), format!(r#"{{"model": "m", "stream": true, "stream_options": {{"include_usage": true}}, "tools": [{{"type": "function", "function": {{"name": "Bash", "parameters": {schema}}}}}], "messages": [{{"role": "user", "content": "go"}}]}}"#)),
                    Dialect::Responses => ("/v1/responses".into(), format!(r#"{{"model": "m", "stream": true, "tools": [{{"type": "function", "name": "Bash", "parameters": {schema}}}], "input": "go"}}"#)),
                    Dialect::Gemini => ("/v1beta/models/m:streamGenerateContent?alt=sse".into(), format!(r#"{{"tools": [{{"functionDeclarations": [{{"name": "Bash", "parametersJsonSchema": {schema}}}]}}], "contents": [{{"role": "user", "parts": [{{"text": "go"}}]}}]}}"#)),
                };
                let (status, head, reply) = call(&gw, &path, "", &body);
                let what = format!("{agent:?} agent on a {provider:?} provider: {head}\n{reply}");
                assert_eq!(status, 200, "{what}");
                assert!(head.to_ascii_lowercase().contains("content-type: text/event-stream"), "{what}");
                // The call, in the agent's own dialect's stream vocabulary.
                let marker = match agent {
                    Dialect::Anthropic => r#""partial_json":"{\"command\":\"ls -la\"}""#,
                    Dialect::Chat => r#""arguments":"{\"command\":\"ls -la\"}""#,
                    Dialect::Responses => r#""delta":"{\"command\":\"ls -la\"}""#,
                    Dialect::Gemini => r#""functionCall":{"args":{"command":"ls -la"}"#,
                };
                assert!(reply.contains(marker) && reply.contains("Bash"), "{what}");
                let r = records(&log, 1);
                assert_eq!(r.len(), 1, "{what}");
                let side = r[0].bridged.as_deref().unwrap_or_else(|| panic!("both sides recorded: {what}"));
                assert_eq!(side.dialect, provider, "{what}");
                assert_eq!(Dialect::of_path(&r[0].path).map(|d| d.0), Some(agent), "the agent's side keeps its path");
                assert!(side.reply.contains("ls -la") && r[0].reply == reply, "{what}");
                assert!(r[0].stand_in && r[0].failure.is_none() && !r[0].side && r[0].step == Some(0), "{:?}", r[0]);
                let tokens = model::usage::of_reply(&r[0]).unwrap_or_else(|| panic!("the provider's tokens: {what}"));
                assert!(tokens.input > 0 && tokens.output > 0, "{tokens:?}");
                checked += 1;
            }
        }
        assert_eq!(checked, 12);
    }

    /// A call the bridge cannot carry is refused in the agent's dialect before anything is sent,
    /// and recorded as a failure naming the field.
    #[test]
    fn what_the_bridge_cannot_carry_is_refused_by_name_and_never_sent() {
        let dir = tempfile::tempdir().unwrap();
        let (url, heads) = provider(|_, w| {
            write!(w, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{{}}").unwrap();
        });
        let log = dir.path().join("model.jsonl");
        let g = Gateway::new(Upstream::parse(&url).unwrap(), "/v1", Auth::parse("openai-chat").unwrap(), None, None, Some(Box::new(File::create(&log).unwrap())), false, Dialects { provider: Dialect::Chat, agent: Some(Dialect::Anthropic), max_output: None });
        let gl = TcpListener::bind("127.0.0.1:0").unwrap();
        let gw = gl.local_addr().unwrap().to_string();
        std::thread::spawn(move || g.serve_all(gl));
        let body = r#"{"model": "m", "max_tokens": 9, "messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]}"#;
        let (status, _, reply) = call(&gw, "/v1/messages", "", body);
        assert_eq!(status, 400);
        let v: Value = serde_json::from_str(&reply).unwrap();
        assert_eq!(v["type"], "error", "in the agent's dialect: {reply}");
        assert!(v["error"]["message"].as_str().unwrap().contains("messages[0].content[0] is a `image` block"), "{reply}");
        let r = records(&log, 1);
        assert!(r[0].failure.as_deref().is_some_and(|f| f.starts_with("bridge: messages[0].content[0]")), "{:?}", r[0].failure);
        assert!(heads.recv_timeout(Duration::from_millis(300)).is_err(), "nothing reached the provider");
    }

    #[test]
    fn upstream_urls_and_paths() {
        let u = Upstream::parse("https://api.z.ai/api/anthropic/").unwrap();
        assert_eq!((u.tls, u.host.as_str(), u.port, u.base_path.as_str(), u.authority()), (true, "api.z.ai", 443, "/api/anthropic", "api.z.ai".to_string()));
        let u = Upstream::parse("http://127.0.0.1:8000/v1").unwrap();
        assert_eq!((u.tls, u.port, u.base_path.as_str(), u.authority()), (false, 8000, "/v1", "127.0.0.1:8000".to_string()));
        assert!(Upstream::parse("ftp://x").is_err() && Upstream::parse("https://:1").is_err() && Upstream::parse("http://h:port").is_err());
        assert_eq!(strip_key_param("/v1beta/models/g:streamGenerateContent?alt=sse&key=AIza"), "/v1beta/models/g:streamGenerateContent?alt=sse");
        assert_eq!(strip_key_param("/m?key=k"), "/m");
        assert!(has_error_event("event: message_start\ndata: {}\n\nevent: error\ndata: {\"type\":\"error\"}\n"));
        assert!(!has_error_event("data: {\"text\":\"event: error\"}\n"));
    }
}
