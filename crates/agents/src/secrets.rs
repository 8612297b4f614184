//! Provider keys, read once from this process's environment and then wiped from the
//! environment block the kernel shows as `/proc/<pid>/environ`: a real agent running on this
//! machine as the same user (or as root) must not find the key there. The value stays in
//! this process's memory for the model gateways it starts; whatever a run leaves is cleared of
//! it ([`redact`]).

use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;

use anyhow::{Context, Result};
use overeager_core::bundle::files;
use serde_json::Value;

static KEYS: Mutex<Option<HashMap<String, Option<String>>>> = Mutex::new(None);

/// The value of the key variable `var` (`None`: unset or empty). The first call reads it
/// and wipes it from the environment block; later calls answer from memory.
pub fn key(var: &str) -> Option<String> {
    let mut keys = KEYS.lock().unwrap_or_else(|e| e.into_inner());
    keys.get_or_insert_with(HashMap::new)
        .entry(var.to_string())
        .or_insert_with(|| {
            let value = std::env::var(var).ok().filter(|v| !v.is_empty());
            if value.is_some() {
                overeager_process::wipe_env_value(var);
            }
            value
        })
        .clone()
}

/// Replaces every occurrence of a secret's value in the files under `dirs` with
/// `[redacted:NAME]`, so an agent that prints or writes its API key does not put it in the
/// bundle. In a model channel it also finds a key a streamed reply spread over several events
/// ([`redact_streamed`]).
pub fn redact(dirs: &[&Path], secrets: &[(String, String)]) -> Result<()> {
    let secrets: Vec<&(String, String)> = secrets.iter().filter(|(_, v)| v.len() >= 8).collect();
    if secrets.is_empty() {
        return Ok(());
    }
    for dir in dirs {
        // Links are neither followed nor rewritten, a root that became one included: what
        // they lead to is not the run's to change.
        for e in walkdir::WalkDir::new(dir).follow_links(false).follow_root_links(false).into_iter().flatten() {
            if !e.file_type().is_file() {
                continue;
            }
            let Ok(meta) = e.metadata() else { continue };
            let Ok(mut file) = overeager_bundle::files::open_walked(e.path(), &meta, false) else { continue };
            let mut bytes = Vec::new();
            if std::io::Read::read_to_end(&mut file, &mut bytes).is_err() {
                continue;
            }
            let mut out = bytes.clone();
            for (name, value) in &secrets {
                out = replace_all(&out, value.as_bytes(), format!("[redacted:{name}]").as_bytes());
            }
            if e.file_name() == files::MODEL {
                out = redact_model_records(&out, &secrets);
            }
            if out != bytes {
                let mut w = overeager_bundle::files::open_walked(e.path(), &meta, true).with_context(|| format!("redacting {}", e.path().display()))?;
                w.set_len(0).and_then(|()| std::io::Write::write_all(&mut w, &out)).with_context(|| format!("redacting {}", e.path().display()))?;
            }
        }
    }
    Ok(())
}

/// `text` with every secret's value replaced by `[redacted:NAME]`, as [`redact`] clears a
/// bundle's files: found byte for byte, and across a streamed reply's events. Values shorter
/// than 8 bytes are left, as there (too likely to be ordinary text).
pub fn redact_text(text: &str, secrets: &[(String, String)]) -> String {
    let mut out = text.to_string();
    for (name, value) in secrets.iter().filter(|(_, v)| v.len() >= 8) {
        let marker = format!("[redacted:{name}]");
        out = out.replace(value.as_str(), &marker);
        if let Some(r) = redact_streamed(&out, value, &marker) {
            out = r;
        }
    }
    out
}

fn replace_all(hay: &[u8], needle: &[u8], with: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(hay.len());
    let mut i = 0;
    while i < hay.len() {
        if hay[i..].starts_with(needle) {
            out.extend_from_slice(with);
            i += needle.len();
        } else {
            out.push(hay[i]);
            i += 1;
        }
    }
    out
}

/// The model channel's records with [`redact_streamed`] applied to each streamed reply; lines
/// it does not change are kept byte for byte.
fn redact_model_records(jsonl: &[u8], secrets: &[&(String, String)]) -> Vec<u8> {
    let mut out = Vec::with_capacity(jsonl.len());
    for line in jsonl.split_inclusive(|b| *b == b'\n') {
        let changed = serde_json::from_slice::<Value>(line).ok().and_then(|mut record| {
            let reply = record.get("reply")?.as_str()?.to_string();
            let mut redacted = reply.clone();
            for (name, value) in secrets {
                if let Some(r) = redact_streamed(&redacted, value, &format!("[redacted:{name}]")) {
                    redacted = r;
                }
            }
            (redacted != reply).then(|| {
                record["reply"] = Value::String(redacted);
                let mut text = serde_json::to_vec(&record).expect("a JSON value serializes");
                if line.ends_with(b"\n") {
                    text.push(b'\n');
                }
                text
            })
        });
        out.extend_from_slice(changed.as_deref().unwrap_or(line));
    }
    out
}

/// The keys whose string values carry a streamed reply's text, a piece per event: Chat
/// Completions' `delta.content` and tool-call `arguments`, Anthropic's `text` and
/// `partial_json`, the Responses API's `delta`, Gemini's `text`, and reasoning text.
const STREAMED_TEXT: &[&str] = &["content", "text", "partial_json", "arguments", "delta", "thinking", "reasoning_content", "refusal"];

/// A server-sent-events reply with every occurrence of `secret` in its streamed text replaced
/// by `marker`, where the text is the pieces of every event's data in order (so a key split
/// across two deltas is found, which no byte search of the stream finds); `None` when it holds
/// none. The marker stands where the secret began; the rest of it is taken out of the pieces
/// that held it, whose events are written again.
pub fn redact_streamed(reply: &str, secret: &str, marker: &str) -> Option<String> {
    if secret.is_empty() {
        return None;
    }
    let mut lines: Vec<(String, Option<Value>)> =
        reply.split_inclusive('\n').map(|l| (l.to_string(), l.trim_end().strip_prefix("data:").and_then(|d| serde_json::from_str(d.trim()).ok()))).collect();
    // Each piece: (line, JSON pointer, its text).
    let mut pieces: Vec<(usize, String, String)> = Vec::new();
    for (i, (_, event)) in lines.iter().enumerate() {
        if let Some(v) = event {
            streamed_pieces(v, "", None, &mut |pointer, text| pieces.push((i, pointer, text.to_string())));
        }
    }
    let whole: String = pieces.iter().map(|(_, _, t)| t.as_str()).collect();
    let found: Vec<(usize, usize)> = whole.match_indices(secret).map(|(at, _)| (at, at + secret.len())).collect();
    if found.is_empty() {
        return None;
    }
    let mut changed = vec![false; lines.len()];
    let mut start = 0;
    for (line, pointer, text) in &pieces {
        let end = start + text.len();
        let mut kept = String::with_capacity(text.len());
        for (offset, ch) in text.char_indices() {
            let at = start + offset;
            if found.iter().any(|&(a, _)| a == at) {
                kept.push_str(marker);
            }
            if !found.iter().any(|&(a, b)| a <= at && at < b) {
                kept.push(ch);
            }
        }
        if kept != *text
            && let Some(slot) = lines[*line].1.as_mut().and_then(|v| v.pointer_mut(pointer))
        {
            *slot = Value::String(kept);
            changed[*line] = true;
        }
        start = end;
    }
    Some(
        lines
            .into_iter()
            .zip(changed)
            .map(|((raw, event), changed)| match event {
                Some(v) if changed => format!("data: {v}{}", &raw[raw.trim_end().len()..]),
                _ => raw,
            })
            .collect(),
    )
}

/// Calls `each` with the JSON pointer and text of every streamed-text string in `v`, in
/// document order.
fn streamed_pieces(v: &Value, pointer: &str, key: Option<&str>, each: &mut dyn FnMut(String, &str)) {
    match v {
        Value::String(s) if key.is_some_and(|k| STREAMED_TEXT.contains(&k)) => each(pointer.to_string(), s),
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                streamed_pieces(item, &format!("{pointer}/{i}"), key, each);
            }
        }
        Value::Object(map) => {
            for (k, item) in map {
                streamed_pieces(item, &format!("{pointer}/{}", k.replace('~', "~0").replace('/', "~1")), Some(k), each);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::redact_streamed;

    #[test]
    fn a_key_split_across_chat_deltas_is_redacted_in_each_piece() {
        let key = "sk-test-7f3a9c1e5b2d4f60a8";
        let chunk = |text: &str| format!("data: {}\n\n", serde_json::json!({"choices": [{"index": 0, "delta": {"content": text}}]}));
        let reply = [chunk("your key is sk-te"), chunk("st-7f3a9c1"), chunk("e5b2d4f60a8, keep it"), "data: [DONE]\n\n".to_string()].concat();
        assert!(!reply.contains(key), "no byte search finds it");
        let out = redact_streamed(&reply, key, "[redacted:K]").expect("found across the deltas");
        let text: String = out
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .filter_map(|d| serde_json::from_str::<serde_json::Value>(d).ok())
            .map(|v| v["choices"][0]["delta"]["content"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(text, "your key is [redacted:K], keep it");
        assert!(out.ends_with("data: [DONE]\n\n") && out.matches("\n\n").count() == 4, "the stream's framing is kept: {out}");
        for piece in ["sk-te", "st-7f3a9c1", "e5b2d4f60a8"] {
            assert!(!out.contains(piece), "{piece} is left in {out}");
        }
    }

    #[test]
    fn anthropic_and_responses_pieces_are_read_and_a_stream_without_the_key_is_untouched() {
        let key = "sk-ant-test-0123456789";
        let reply = concat!(
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":\"sk-ant-te\"}}\n\n",
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"st-0123456789\"}}\n\n",
        );
        let out = redact_streamed(reply, key, "[redacted:K]").unwrap();
        assert!(out.contains("[redacted:K]") && !out.contains("sk-ant-te") && !out.contains("0123456789"), "{out}");
        assert!(out.starts_with("event: content_block_delta\ndata: "), "{out}");
        let responses = "data: {\"type\":\"response.output_text.delta\",\"delta\":\"sk-ant-test-01\"}\n\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"23456789 done\"}\n\n";
        assert!(redact_streamed(responses, key, "[r]").unwrap().contains("\"delta\":\"[r]\""));
        assert_eq!(redact_streamed("data: {\"delta\":\"nothing here\"}\n\n", key, "[r]"), None);
    }
    #[test]
    fn a_key_is_kept_in_memory_and_gone_from_proc_environ() {
        // Set before the process started, as a user's key is: run this test binary again
        // with the variable in its environment.
        const VAR: &str = "OVEREAGER_SECRETS_TEST_KEY";
        if std::env::var_os("OVEREAGER_SECRETS_TEST_CHILD").is_none() {
            let me = std::env::current_exe().unwrap();
            let out = std::process::Command::new(me)
                .args(["--exact", "secrets::tests::a_key_is_kept_in_memory_and_gone_from_proc_environ", "--nocapture"])
                .env("OVEREAGER_SECRETS_TEST_CHILD", "1")
                .env(VAR, "sk-test-wipe-me-0123456789")
                .output()
                .unwrap();
            assert!(out.status.success(), "{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
            assert!(String::from_utf8_lossy(&out.stdout).contains("1 passed"), "the child ran the test");
            return;
        }
        let environ = || std::fs::read("/proc/self/environ").unwrap();
        let has = |hay: &[u8], needle: &[u8]| hay.windows(needle.len()).any(|w| w == needle);
        assert!(has(&environ(), b"sk-test-wipe-me-0123456789"));
        assert_eq!(super::key(VAR).as_deref(), Some("sk-test-wipe-me-0123456789"));
        assert!(!has(&environ(), b"sk-test-wipe-me-0123456789"), "wiped from /proc/self/environ");
        assert!(has(&environ(), b"OVEREAGER_SECRETS_TEST_CHILD=1"), "the other entries stay");
        assert_eq!(super::key(VAR).as_deref(), Some("sk-test-wipe-me-0123456789"), "still known to this process");
    }
}
