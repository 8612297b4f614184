//! hyper answers a request it cannot parse (a head too large, a URI too long, a malformed
//! request line or header) by itself, before any handler runs, with an empty body. Every other
//! error of this server is `{"error": …, "status": …}`; [`JsonAutoReplies`] wraps a connection
//! and gives those automatic answers the same body, saying what was wrong and what to do.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// A connection whose automatic error answers from hyper get a JSON body.
pub(crate) struct JsonAutoReplies<T> {
    inner: T,
    /// Bytes of a rewritten answer still to be written.
    pending: Vec<u8>,
}

impl<T> JsonAutoReplies<T> {
    pub(crate) fn new(inner: T) -> Self {
        JsonAutoReplies { inner, pending: Vec::new() }
    }
}

/// What a client is told for each status hyper sends by itself.
fn advice(status: u16) -> Option<&'static str> {
    Some(match status {
        400 => "the request line or a header is malformed; send HTTP/1.1 with valid header names and values",
        414 => "the URI is too long; send a shorter path and query (search terms go in one `q`)",
        431 => "the request's header section is too large; send fewer or shorter headers",
        _ => return None,
    })
}

/// `head` with a JSON body, if it is one of hyper's automatic error answers: a status hyper sends
/// by itself and `content-length: 0` (this server's own errors always have a body).
fn rewrite(head: &[u8]) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(head).ok()?;
    let rest = text.strip_prefix("HTTP/1.1 ")?;
    let status: u16 = rest.get(..3)?.parse().ok()?;
    let message = advice(status)?;
    let end = text.find("\r\n\r\n")?;
    if end + 4 != text.len() || !text[..end].lines().any(|l| l.eq_ignore_ascii_case("content-length: 0")) {
        return None;
    }
    let body = serde_json::to_string(&overeager_wire::server::ErrorBody { error: message.into(), status }).ok()?;
    let mut out = String::with_capacity(text.len() + body.len() + 64);
    for line in text[..end].split("\r\n") {
        if line.eq_ignore_ascii_case("content-length: 0") {
            out.push_str(&format!("content-type: application/json\r\ncontent-length: {}", body.len()));
        } else {
            out.push_str(line);
        }
        out.push_str("\r\n");
    }
    out.push_str("\r\n");
    out.push_str(&body);
    Some(out.into_bytes())
}

impl<T: AsyncWrite + Unpin> JsonAutoReplies<T> {
    /// Writes what is pending; ready once nothing is.
    fn drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while !self.pending.is_empty() {
            match Pin::new(&mut self.inner).poll_write(cx, &self.pending) {
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(n)) => {
                    self.pending.drain(..n);
                }
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
        Poll::Ready(Ok(()))
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for JsonAutoReplies<T> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for JsonAutoReplies<T> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        std::task::ready!(self.drain(cx))?;
        // An automatic answer is a whole head in one write (writes are not vectored here).
        if buf.len() < 512
            && let Some(rewritten) = rewrite(buf)
        {
            self.pending = rewritten;
            // Counted as written: the rest goes out on the next write, flush or shutdown.
            let _ = self.drain(cx)?;
            return Poll::Ready(Ok(buf.len()));
        }
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        std::task::ready!(self.drain(cx))?;
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        std::task::ready!(self.drain(cx))?;
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn is_write_vectored(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hyper_s_empty_automatic_answers_get_a_json_body_and_nothing_else_changes() {
        let head = "HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\nconnection: close\r\ndate: Mon, 07 Dec 2026 10:00:00 GMT\r\n\r\n";
        let out = String::from_utf8(rewrite(head.as_bytes()).unwrap()).unwrap();
        let (h, body) = out.split_once("\r\n\r\n").unwrap();
        assert!(h.starts_with("HTTP/1.1 431 ") && h.contains("content-type: application/json") && h.contains(&format!("content-length: {}", body.len())) && h.contains("date: "), "{out}");
        let v: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(v["status"], 431);
        assert!(v["error"].as_str().unwrap().contains("header section is too large"));
        assert!(rewrite(b"HTTP/1.1 414 URI Too Long\r\ncontent-length: 0\r\n\r\n").is_some());
        // The server's own answers, and anything with a body, pass as they are.
        assert!(rewrite(b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: 12\r\n\r\n").is_none());
        assert!(rewrite(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n").is_none());
        assert!(rewrite(b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\n\r\nmore").is_none());
    }
}
