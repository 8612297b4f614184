//! Server-sent events read as they arrive, and written.

use serde_json::Value;

/// Reads an event stream in whatever pieces it arrives in.
#[derive(Default)]
pub struct Parser {
    pending: Vec<u8>,
    /// How far `pending` is known to hold no event's end (a long event arriving in many
    /// pieces is scanned once).
    scanned: usize,
}

impl Parser {
    /// The events `bytes` completes: each event's name (`event:`) and its data (`data:` lines
    /// joined). Comments and events without data are passed over.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<(Option<String>, String)> {
        self.pending.extend_from_slice(bytes);
        let mut out = Vec::new();
        while let Some((end, sep)) = boundary(&self.pending, self.scanned.saturating_sub(3)) {
            self.scanned = 0;
            let block: Vec<u8> = self.pending.drain(..end + sep).collect();
            let text = String::from_utf8_lossy(&block[..end]);
            let (mut name, mut data): (Option<String>, Vec<&str>) = (None, Vec::new());
            for line in text.lines() {
                let line = line.strip_suffix('\r').unwrap_or(line);
                if let Some(v) = line.strip_prefix("event:") {
                    name = Some(v.trim().to_string());
                } else if let Some(v) = line.strip_prefix("data:") {
                    data.push(v.strip_prefix(' ').unwrap_or(v));
                }
            }
            if !data.is_empty() {
                out.push((name, data.join("\n")));
            }
        }
        self.scanned = self.pending.len();
        out
    }
}

/// Where the first event of `buf` ends (looking from `from` on), and the length of the blank
/// line that ends it.
fn boundary(buf: &[u8], from: usize) -> Option<(usize, usize)> {
    (from..buf.len()).find_map(|i| {
        if buf[i..].starts_with(b"\n\n") {
            Some((i, 2))
        } else if buf[i..].starts_with(b"\r\n\r\n") {
            Some((i, 4))
        } else {
            None
        }
    })
}

/// Writes one event: its name when it has one, and its data.
pub fn write(out: &mut String, name: Option<&str>, data: &Value) {
    write_text(out, name, &data.to_string());
}

/// Writes one event whose data is `text` (one `data:` line a line of it).
pub fn write_text(out: &mut String, name: Option<&str>, text: &str) {
    if let Some(n) = name {
        out.push_str("event: ");
        out.push_str(n);
        out.push('\n');
    }
    for line in text.split('\n') {
        out.push_str("data: ");
        out.push_str(line);
        out.push('\n');
    }
    out.push('\n');
}
