//! The little HTTP/1.1 the shim's servers need: reading a request head and body. Both the
//! egress proxy and the scripted model endpoint are loopback services for one run.

use std::io::BufRead;

/// Longest request head accepted.
pub const MAX_HEAD: usize = 16 << 10;
/// Largest request body accepted (a long conversation resent whole is a few MiB).
pub const MAX_BODY: usize = 64 << 20;

/// Reads the request line and header lines, without their line ends, up to the blank line.
pub fn read_head(r: &mut impl BufRead) -> Result<Vec<String>, String> {
    let mut lines = Vec::new();
    let mut total = 0;
    loop {
        let mut line = String::new();
        let n = r.read_line(&mut line).map_err(|e| format!("reading the request: {e}"))?;
        total += n;
        if n == 0 || total > MAX_HEAD {
            return Err("the request head is incomplete or too long".into());
        }
        if line == "\r\n" || line == "\n" {
            break;
        }
        lines.push(line.trim_end().to_string());
    }
    if lines.is_empty() {
        return Err("empty request".into());
    }
    Ok(lines)
}

/// The value of header `name` (case-insensitive) among head lines.
pub fn header<'a>(lines: &'a [String], name: &str) -> Option<&'a str> {
    lines.iter().skip(1).find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim().eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

/// Reads the body that the head announces: `Content-Length` bytes, or chunked.
pub fn read_body(r: &mut impl BufRead, lines: &[String]) -> Result<Vec<u8>, String> {
    let chunked = header(lines, "transfer-encoding").is_some_and(|v| v.to_ascii_lowercase().contains("chunked"));
    if chunked {
        let mut body = Vec::new();
        let mut trailers = 0;
        loop {
            let size_line = read_bounded_line(r, "a chunk size")?;
            let hex = size_line.trim().split(';').next().unwrap_or("").trim();
            let size = usize::from_str_radix(hex, 16).map_err(|_| format!("bad chunk size `{}`", size_line.trim().escape_debug()))?;
            if size == 0 {
                // Trailers end with a blank line; they count against the head's limit.
                loop {
                    let t = read_bounded_line(r, "a trailer")?;
                    trailers += t.len();
                    if t.is_empty() || t.trim().is_empty() {
                        return Ok(body);
                    }
                    if trailers > MAX_HEAD {
                        return Err("the request's trailers are too long".into());
                    }
                }
            }
            // Compared without adding, so a size near usize::MAX cannot wrap past the limit.
            if size > MAX_BODY - body.len() {
                return Err("the request body is too large".into());
            }
            let start = body.len();
            body.resize(start + size, 0);
            r.read_exact(&mut body[start..]).map_err(|e| format!("reading a chunk: {e}"))?;
            let mut crlf = [0u8; 2];
            r.read_exact(&mut crlf).map_err(|e| format!("reading a chunk end: {e}"))?;
            if &crlf != b"\r\n" {
                return Err("a chunk is longer than its size says".into());
            }
        }
    }
    let len: usize = match header(lines, "content-length") {
        Some(v) => v.parse().map_err(|_| format!("bad Content-Length `{v}`"))?,
        None => 0,
    };
    if len > MAX_BODY {
        return Err("the request body is too large".into());
    }
    let mut body = vec![0u8; len];
    r.read_exact(&mut body).map_err(|e| format!("reading the request body: {e}"))?;
    Ok(body)
}

/// One line of at most [`MAX_HEAD`] bytes (with its line end; empty at the end of input).
fn read_bounded_line(r: &mut impl BufRead, what: &str) -> Result<String, String> {
    let mut line = String::new();
    let mut limited = <&mut _ as std::io::Read>::take(r, MAX_HEAD as u64 + 1);
    let n = limited.read_line(&mut line).map_err(|e| format!("reading {what}: {e}"))?;
    if n > MAX_HEAD {
        return Err(format!("{what} is longer than {MAX_HEAD} bytes"));
    }
    Ok(line)
}

/// The reason phrase of the few statuses the shim's servers send.
pub fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        409 => "Conflict",
        502 => "Bad Gateway",
        _ => "Error",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_by_length_and_chunked() {
        let mut r = std::io::Cursor::new(b"POST /x HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc".to_vec());
        let head = read_head(&mut r).unwrap();
        assert_eq!(header(&head, "content-LENGTH"), Some("3"));
        assert_eq!(read_body(&mut r, &head).unwrap(), b"abc");
        let mut r = std::io::Cursor::new(b"POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n".to_vec());
        let head = read_head(&mut r).unwrap();
        assert_eq!(read_body(&mut r, &head).unwrap(), b"abcde");
        assert!(read_head(&mut std::io::Cursor::new(b"GET / HTTP/1.1\r\n".to_vec())).is_err());
    }

    #[test]
    fn hostile_chunk_sizes_are_refused_not_panicked_on() {
        let chunked = |body: &[u8]| {
            let mut bytes = b"POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
            bytes.extend_from_slice(body);
            let mut r = std::io::Cursor::new(bytes);
            let head = read_head(&mut r).unwrap();
            read_body(&mut r, &head)
        };
        // A size that overflows a sum with what was read, and one beyond usize.
        let overflow = chunked(b"1\r\na\r\nffffffffffffffff\r\nb\r\n0\r\n\r\n").unwrap_err();
        assert!(overflow.contains("too large"), "{overflow}");
        assert!(chunked(b"1ffffffffffffffff\r\n").unwrap_err().contains("bad chunk size"));
        assert!(chunked(b"3\r\nabcdef\r\n0\r\n\r\n").unwrap_err().contains("longer than its size"));
        // A size line or trailers with no end are bounded.
        let endless = [b"1".repeat(MAX_HEAD + 10), b"\r\n".to_vec()].concat();
        assert!(chunked(&endless).unwrap_err().contains("longer than"));
        let trailers = [b"0\r\n".to_vec(), b"X-A: b\r\n".repeat(MAX_HEAD / 8 + 1)].concat();
        assert!(chunked(&trailers).unwrap_err().contains("trailers are too long"));
    }
}
