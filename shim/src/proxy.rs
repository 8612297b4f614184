//! `overeager-shim proxy`: the egress proxy of runs that may reach a model API.
//!
//! The agent's container sits on a network with no route out; this proxy, on that network and
//! on one with a route, is its only way out. It serves HTTP `CONNECT` tunnels (what HTTPS
//! clients ask a proxy for) and plain absolute-URI HTTP requests, lets through only
//! `host:port` pairs on the allowlist, refuses everything else with 403, and writes one
//! [`NetRecord`] line per connection — the `net` channel.

use std::io::{BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use overeager_core::bundle::NetRecord;

use crate::now_us;

/// How long connecting to an allowed host may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(20);

struct Options {
    listen: String,
    allow: Vec<(String, u16)>,
    log: Option<PathBuf>,
}

fn parse(args: &[String]) -> Result<Options, String> {
    let mut o = Options { listen: "0.0.0.0:3128".into(), allow: Vec::new(), log: None };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = || it.next().cloned().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "--listen" => o.listen = value()?,
            "--log" => o.log = Some(PathBuf::from(value()?)),
            "--allow" => {
                let v = value()?;
                let (host, port) = v.rsplit_once(':').ok_or_else(|| format!("--allow `{v}` must be host:port"))?;
                let port = port.parse().map_err(|_| format!("--allow `{v}`: `{port}` is not a port"))?;
                o.allow.push((host.to_ascii_lowercase(), port));
            }
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    Ok(o)
}

pub fn main(args: &[String]) -> i32 {
    let o = match parse(args) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("overeager-shim proxy: {e}");
            return 2;
        }
    };
    let listener = match TcpListener::bind(&o.listen) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("overeager-shim proxy: cannot listen on {}: {e}", o.listen);
            return 1;
        }
    };
    let log: Box<dyn Write + Send> = match &o.log {
        Some(p) => match std::fs::OpenOptions::new().create(true).append(true).open(p) {
            Ok(f) => Box::new(f),
            Err(e) => {
                eprintln!("overeager-shim proxy: cannot open {}: {e}", p.display());
                return 1;
            }
        },
        None => Box::new(std::io::stdout()),
    };
    let log = Arc::new(Mutex::new(log));
    let allow = Arc::new(o.allow);
    eprintln!("overeager-shim proxy: listening on {}", o.listen);
    for conn in listener.incoming() {
        let Ok(conn) = conn else { continue };
        let (log, allow) = (log.clone(), allow.clone());
        std::thread::spawn(move || {
            let record = serve(conn, &allow);
            crate::append_record(&log, &record);
        });
    }
    0
}

/// The request line and headers of one request.
struct Head {
    method: String,
    host: String,
    port: u16,
    /// The request rewritten for the origin server (plain HTTP); empty for `CONNECT`.
    forward: Vec<u8>,
}

/// Reads the head of the agent's request.
fn read_head(r: &mut BufReader<TcpStream>) -> Result<Head, String> {
    let lines = crate::http::read_head(r)?;
    let first = lines.first().ok_or("empty request")?;
    let mut parts = first.split_whitespace();
    let (method, target, version) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""), parts.next().unwrap_or("HTTP/1.1"));
    if method.eq_ignore_ascii_case("CONNECT") {
        let (host, port) = split_host_port(target, 443)?;
        return Ok(Head { method: "CONNECT".into(), host, port, forward: Vec::new() });
    }
    // A plain request through a proxy names the whole URL: `GET http://host:port/path HTTP/1.1`.
    let rest = target.strip_prefix("http://").ok_or_else(|| format!("`{method} {target}`: only CONNECT and http:// requests are proxied"))?;
    let (authority, path) = rest.find('/').map(|i| (&rest[..i], &rest[i..])).unwrap_or((rest, "/"));
    let (host, port) = split_host_port(authority, 80)?;
    let mut forward = format!("{method} {path} {version}\r\n").into_bytes();
    for h in &lines[1..] {
        let name = h.split(':').next().unwrap_or("").trim().to_ascii_lowercase();
        if name != "proxy-connection" && name != "proxy-authorization" {
            forward.extend_from_slice(h.as_bytes());
            forward.extend_from_slice(b"\r\n");
        }
    }
    forward.extend_from_slice(b"\r\n");
    Ok(Head { method: method.to_string(), host, port, forward })
}

fn split_host_port(s: &str, default: u16) -> Result<(String, u16), String> {
    let s = s.trim();
    // `[::1]:443`
    if let Some(rest) = s.strip_prefix('[') {
        let (h, p) = rest.split_once(']').ok_or_else(|| format!("bad address `{s}`"))?;
        let port = p.strip_prefix(':').map(|p| p.parse().map_err(|_| format!("bad port in `{s}`"))).transpose()?.unwrap_or(default);
        return Ok((h.to_ascii_lowercase(), port));
    }
    match s.rsplit_once(':') {
        Some((h, p)) => Ok((h.to_ascii_lowercase(), p.parse().map_err(|_| format!("bad port in `{s}`"))?)),
        None if !s.is_empty() => Ok((s.to_ascii_lowercase(), default)),
        None => Err("no host in the request".into()),
    }
}

/// Handles one connection from the agent; returns its record.
fn serve(conn: TcpStream, allow: &[(String, u16)]) -> NetRecord {
    let start_us = now_us();
    let mut rec = NetRecord { start_us, end_us: start_us, method: String::new(), host: String::new(), port: 0, allowed: false, bytes_out: 0, bytes_in: 0, error: None };
    if let Err(e) = proxy_one(conn, allow, &mut rec) {
        rec.error = Some(e);
    }
    rec.end_us = now_us();
    rec
}

/// Reads the agent's request, refuses it or connects and relays, filling in `rec` as it goes.
fn proxy_one(conn: TcpStream, allow: &[(String, u16)], rec: &mut NetRecord) -> Result<(), String> {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(30)));
    let mut reader = BufReader::new(conn.try_clone().map_err(|e| e.to_string())?);
    let mut conn = conn;
    let head = read_head(&mut reader).inspect_err(|_| {
        let _ = conn.write_all(b"HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n");
    })?;
    rec.method = head.method.clone();
    rec.host = head.host.clone();
    rec.port = head.port;
    rec.allowed = allow.iter().any(|(h, p)| *h == head.host && *p == head.port);
    if !rec.allowed {
        let body = format!("overeager: egress to {}:{} is not allowed for this run\n", head.host, head.port);
        let _ = write!(conn, "HTTP/1.1 403 Forbidden\r\nConnection: close\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n{body}", body.len());
        return Err("not on the allowlist".into());
    }
    let mut upstream = (head.host.as_str(), head.port)
        .to_socket_addrs()
        .map_err(|e| format!("resolving {}: {e}", head.host))
        .and_then(|mut addrs| addrs.next().ok_or_else(|| format!("{} has no address", head.host)))
        .and_then(|a| TcpStream::connect_timeout(&a, CONNECT_TIMEOUT).map_err(|e| format!("connecting to {a}: {e}")))
        .inspect_err(|_| {
            let _ = conn.write_all(b"HTTP/1.1 502 Bad Gateway\r\nConnection: close\r\nContent-Length: 0\r\n\r\n");
        })?;
    let _ = conn.set_read_timeout(None);
    let sent = if head.method == "CONNECT" {
        conn.write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n").map(|()| 0)
    } else {
        upstream.write_all(&head.forward).map(|()| head.forward.len() as u64)
    }
    .map_err(|e| e.to_string())?;
    // Bytes the agent sent right after the head are in the reader's buffer.
    let buffered = reader.buffer().to_vec();
    let (out, back) = relay(reader.into_inner(), upstream, buffered);
    rec.bytes_out = sent + out;
    rec.bytes_in = back;
    Ok(())
}

/// Copies both ways until each side is done; returns (bytes to upstream, bytes back).
fn relay(agent: TcpStream, upstream: TcpStream, buffered: Vec<u8>) -> (u64, u64) {
    let (Ok(agent2), Ok(upstream2)) = (agent.try_clone(), upstream.try_clone()) else { return (0, 0) };
    let up = std::thread::spawn(move || {
        let (mut from, mut to) = (agent2, upstream2);
        let mut n = buffered.len() as u64;
        if to.write_all(&buffered).is_err() {
            return n;
        }
        n += std::io::copy(&mut from, &mut to).unwrap_or(0);
        let _ = to.shutdown(Shutdown::Write);
        n
    });
    let (mut from, mut to) = (upstream, agent);
    let mut buf = [0u8; 16 << 10];
    let mut back = 0u64;
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if to.write_all(&buf[..n]).is_err() {
                    break;
                }
                back += n as u64;
            }
        }
    }
    // The host is done: end the agent's side too, which also ends the copy the other way.
    let _ = to.shutdown(Shutdown::Both);
    (up.join().unwrap_or(0), back)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_port_forms() {
        assert_eq!(split_host_port("api.example.com:443", 80).unwrap(), ("api.example.com".into(), 443));
        assert_eq!(split_host_port("Example.COM", 80).unwrap(), ("example.com".into(), 80));
        assert_eq!(split_host_port("[::1]:8080", 80).unwrap(), ("::1".into(), 8080));
        assert!(split_host_port("h:x", 80).is_err());
    }

    /// A tunnel to an allowed local server carries bytes both ways; another port is refused.
    #[test]
    fn allows_the_allowlist_and_refuses_the_rest() {
        let origin = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = origin.local_addr().unwrap().port();
        std::thread::spawn(move || {
            let (mut s, _) = origin.accept().unwrap();
            let mut buf = [0u8; 4];
            s.read_exact(&mut buf).unwrap();
            s.write_all(b"pong").unwrap();
        });
        let proxy = TcpListener::bind("127.0.0.1:0").unwrap();
        let paddr = proxy.local_addr().unwrap();
        let allow = vec![("127.0.0.1".to_string(), port)];
        let records = std::thread::spawn(move || {
            let mut recs = Vec::new();
            for _ in 0..2 {
                let (c, _) = proxy.accept().unwrap();
                recs.push(serve(c, &allow));
            }
            recs
        });
        let mut c = TcpStream::connect(paddr).unwrap();
        write!(c, "CONNECT 127.0.0.1:{port} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\nping").unwrap();
        let mut reply = Vec::new();
        c.read_to_end(&mut reply).unwrap_or(0);
        let reply = String::from_utf8_lossy(&reply);
        assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
        assert!(reply.ends_with("pong"), "{reply}");
        drop(c);
        let mut d = TcpStream::connect(paddr).unwrap();
        write!(d, "CONNECT 127.0.0.1:1 HTTP/1.1\r\n\r\n").unwrap();
        let mut refused = String::new();
        d.read_to_string(&mut refused).unwrap();
        assert!(refused.starts_with("HTTP/1.1 403"), "{refused}");
        let recs = records.join().unwrap();
        assert!(recs[0].allowed && recs[0].error.is_none(), "{:?}", recs[0]);
        assert_eq!((recs[0].bytes_out, recs[0].bytes_in), (4, 4));
        assert_eq!((recs[1].allowed, recs[1].port), (false, 1));
    }
}
