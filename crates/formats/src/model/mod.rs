//! The scripted model: a scenario's play answered as a language model would, in the wire
//! dialect and tool vocabulary of the real agent CLI that asks.
//!
//! The endpoint is stateless: what to answer follows from the play and the history the request
//! resends (the model's earlier calls and what the tools answered; see [`planner`]), so a CLI
//! that retries or resends its history gets the same answer again. A request without the
//! agent's tools (a title, a path extraction, a router call) is a *side*
//! request and gets a well-formed canned answer. Everything here is pure; the HTTP server and
//! the `model.jsonl` channel live in the run stage; the record's types are `overeager_core::model`'s.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use overeager_core::paths::Roots;
use overeager_core::scenario::Step;

pub mod catalog;
pub mod planner;
pub mod text;
pub mod tools;

pub use overeager_core::model::{Dialect, MODEL_API_ERROR, ModelRecord, UNANSWERED_AT_END, conversation, history, usage};

pub use history::{Answered, answered_calls};
pub use tools::{Role, Vocab, call_for, finish_call, shell_call};

/// One tool call of the scripted model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub name: String,
    pub args: Value,
}

/// What a turn of the scripted model says.
#[derive(Debug, Clone, PartialEq)]
pub enum Turn {
    Call(ToolCall),
    Final(String),
}

/// Quotes `s` for a POSIX shell (single quotes; a quote inside becomes `'\''`).
pub fn sh_quote(s: &str) -> String {
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"/._-+=:,@%".contains(&b)) {
        return s.to_string();
    }
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// Escapes regex metacharacters, for search tools that take a regular expression while a
/// play's `grep` step is literal.
pub fn regex_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if r"\.+*?()|[]{}^$#&-~".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The absolute path a play step's path names (relative to the workspace, or `~/…`).
pub fn absolute(path: &str, roots: &Roots) -> String {
    let join = |root: &str, rest: &str| if rest.is_empty() || rest == "." { root.to_string() } else { format!("{}/{rest}", root.trim_end_matches('/')) };
    if path == "~" {
        roots.home.clone()
    } else if let Some(rest) = path.strip_prefix("~/") {
        join(&roots.home, rest)
    } else if path.starts_with('/') {
        path.to_string()
    } else {
        join(&roots.workspace, path)
    }
}

/// A step as a shell command, for agents whose only tool is a shell (and for steps whose
/// in-process tool the agent does not offer). Paths in the workspace stay relative (the
/// command runs there); paths in `$HOME` are absolute.
pub fn shell_command(step: &Step, roots: &Roots) -> String {
    let p = |path: &str| if path.starts_with("~") { sh_quote(&absolute(path, roots)) } else { sh_quote(path) };
    match step {
        Step::Sh { command } => command.clone(),
        Step::Read { path } => format!("cat -- {}", p(path)),
        Step::Write { path, content } => {
            let parent = std::path::Path::new(path).parent().map(|d| d.to_string_lossy().into_owned()).filter(|d| !d.is_empty() && d != "~");
            let mkdir = parent.map(|d| format!("mkdir -p -- {} && ", p(&d))).unwrap_or_default();
            format!("{mkdir}printf '%s' {} > {}", sh_quote(content), p(path))
        }
        // Literal, first occurrence only, as the in-process edit does; the strings travel in
        // the environment so no quoting reaches perl's own syntax.
        Step::Edit { path, old, new } => {
            format!("OLD={} NEW={} perl -0777 -pi -e 's/\\Q$ENV{{OLD}}\\E/$ENV{{NEW}}/' -- {}", sh_quote(old), sh_quote(new), p(path))
        }
        Step::Grep { pattern, path } => format!("grep -rnF -e {} -- {}", sh_quote(pattern), p(path)),
    }
}

/// The canned answer to a side request: JSON that satisfies a requested response schema
/// (Gemini's model router, both generations of it), else a short neutral text.
pub fn side_answer(dialect: Dialect, body: &Value) -> String {
    let schema = body.pointer("/generationConfig/responseJsonSchema").or_else(|| body.pointer("/generationConfig/responseSchema"));
    if dialect == Dialect::Gemini && schema.is_some() {
        return json!({"reasoning": "scripted", "model_choice": "flash", "complexity_reasoning": "scripted", "complexity_score": 1}).to_string();
    }
    let text = serde_json::to_string(body).unwrap_or_default();
    if text.contains("policy_spec") {
        // Claude Code's command-prefix detection.
        return "none".into();
    }
    "OK".into()
}

/// A reply body and its content type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub content_type: &'static str,
    pub body: String,
}

fn sse(events: &[(Option<&str>, Value)]) -> Reply {
    let mut body = String::new();
    for (name, data) in events {
        if let Some(n) = name {
            body.push_str("event: ");
            body.push_str(n);
            body.push('\n');
        }
        body.push_str("data: ");
        body.push_str(&data.to_string());
        body.push_str("\n\n");
    }
    Reply { content_type: "text/event-stream", body }
}

fn json_reply(v: Value) -> Reply {
    Reply { content_type: "application/json", body: v.to_string() }
}

/// The tokens a reply reports: estimated as a real model's would be, about four bytes of text
/// each, so that usage and cost through a stand-in provider are of a realistic size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tokens {
    pub input: u64,
    pub output: u64,
}

impl Tokens {
    /// The estimate for a request `body` answered with `turn`.
    pub fn estimate(body: &Value, turn: &Turn) -> Tokens {
        let count = |bytes: usize| (bytes as u64).div_ceil(4).max(1);
        let output = match turn {
            Turn::Call(c) => c.name.len() + c.args.to_string().len(),
            Turn::Final(t) => t.len(),
        };
        Tokens { input: count(body.to_string().len()), output: count(output) }
    }
}

/// Renders a turn as the reply of `dialect`; `n` numbers the ids (the request's sequence
/// number), `model` is echoed back, `tokens` reported as its usage (in a Chat Completions
/// stream only when the request asked for it, `stream_options.include_usage`, as OpenAI's
/// API does).
pub fn render(dialect: Dialect, turn: &Turn, stream: bool, model: &str, n: u64, tokens: Tokens, include_usage: bool) -> Reply {
    match dialect {
        Dialect::Anthropic => anthropic(turn, stream, model, n, tokens),
        Dialect::Chat => chat(turn, stream, model, n, tokens, include_usage),
        Dialect::Responses => responses(turn, model, n, tokens),
        Dialect::Gemini => gemini(turn, stream, model, tokens),
    }
}

fn anthropic(turn: &Turn, stream: bool, model: &str, n: u64, tokens: Tokens) -> Reply {
    let id = format!("msg_scripted_{n}");
    let usage = json!({"input_tokens": tokens.input, "output_tokens": tokens.output, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0});
    let (block, stop) = match turn {
        Turn::Call(c) => (json!({"type": "tool_use", "id": format!("toolu_scripted_{n}"), "name": c.name, "input": c.args}), "tool_use"),
        Turn::Final(t) => (json!({"type": "text", "text": t}), "end_turn"),
    };
    if !stream {
        return json_reply(json!({"id": id, "type": "message", "role": "assistant", "model": model, "content": [block], "stop_reason": stop, "stop_sequence": null, "usage": usage}));
    }
    let (start, delta) = match turn {
        Turn::Call(c) => (
            json!({"type": "tool_use", "id": format!("toolu_scripted_{n}"), "name": c.name, "input": {}}),
            json!({"type": "input_json_delta", "partial_json": c.args.to_string()}),
        ),
        Turn::Final(t) => (json!({"type": "text", "text": ""}), json!({"type": "text_delta", "text": t})),
    };
    sse(&[
        (Some("message_start"), json!({"type": "message_start", "message": {"id": id, "type": "message", "role": "assistant", "model": model, "content": [], "stop_reason": null, "stop_sequence": null, "usage": usage}})),
        (Some("content_block_start"), json!({"type": "content_block_start", "index": 0, "content_block": start})),
        (Some("content_block_delta"), json!({"type": "content_block_delta", "index": 0, "delta": delta})),
        (Some("content_block_stop"), json!({"type": "content_block_stop", "index": 0})),
        (Some("message_delta"), json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null}, "usage": {"output_tokens": tokens.output}})),
        (Some("message_stop"), json!({"type": "message_stop"})),
    ])
}

fn chat(turn: &Turn, stream: bool, model: &str, n: u64, tokens: Tokens, include_usage: bool) -> Reply {
    let id = format!("chatcmpl-scripted-{n}");
    let usage = json!({"prompt_tokens": tokens.input, "completion_tokens": tokens.output, "total_tokens": tokens.input + tokens.output});
    let (message, finish) = match turn {
        Turn::Call(c) => (
            json!({"role": "assistant", "content": null, "tool_calls": [{"index": 0, "id": format!("call_scripted_{n}"), "type": "function", "function": {"name": c.name, "arguments": c.args.to_string()}}]}),
            "tool_calls",
        ),
        Turn::Final(t) => (json!({"role": "assistant", "content": t}), "stop"),
    };
    if !stream {
        return json_reply(json!({"id": id, "object": "chat.completion", "created": 0, "model": model, "choices": [{"index": 0, "message": message, "finish_reason": finish}], "usage": usage}));
    }
    let chunk = |choice: Value| json!({"id": id, "object": "chat.completion.chunk", "created": 0, "model": model, "choices": [choice]});
    let mut r = sse(&[
        (None, chunk(json!({"index": 0, "delta": message, "finish_reason": null}))),
        (None, chunk(json!({"index": 0, "delta": {}, "finish_reason": finish}))),
    ]);
    if include_usage {
        let last = json!({"id": id, "object": "chat.completion.chunk", "created": 0, "model": model, "choices": [], "usage": usage});
        r.body.push_str(&format!("data: {last}\n\n"));
    }
    r.body.push_str("data: [DONE]\n\n");
    r
}

fn responses(turn: &Turn, model: &str, n: u64, tokens: Tokens) -> Reply {
    let rid = format!("resp_scripted_{n}");
    let (added, done) = match turn {
        Turn::Call(c) => {
            let base = |args: String, status: &str| json!({"type": "function_call", "id": format!("fc_scripted_{n}"), "call_id": format!("call_scripted_{n}"), "name": c.name, "arguments": args, "status": status});
            (base(String::new(), "in_progress"), base(c.args.to_string(), "completed"))
        }
        Turn::Final(t) => (
            json!({"type": "message", "id": format!("msg_scripted_{n}"), "role": "assistant", "status": "in_progress", "content": []}),
            json!({"type": "message", "id": format!("msg_scripted_{n}"), "role": "assistant", "status": "completed", "content": [{"type": "output_text", "text": t, "annotations": []}]}),
        ),
    };
    let response = |status: &str, output: Value| {
        json!({"id": rid, "object": "response", "created_at": 0, "status": status, "model": model, "output": output,
               "usage": {"input_tokens": tokens.input, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": tokens.output, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": tokens.input + tokens.output}})
    };
    let mut events = vec![
        (Some("response.created"), json!({"type": "response.created", "response": response("in_progress", json!([]))})),
        (Some("response.output_item.added"), json!({"type": "response.output_item.added", "output_index": 0, "item": added})),
    ];
    if let Turn::Final(t) = turn {
        events.push((
            Some("response.output_text.delta"),
            json!({"type": "response.output_text.delta", "item_id": format!("msg_scripted_{n}"), "output_index": 0, "content_index": 0, "delta": t}),
        ));
    }
    events.push((Some("response.output_item.done"), json!({"type": "response.output_item.done", "output_index": 0, "item": done})));
    events.push((Some("response.completed"), json!({"type": "response.completed", "response": response("completed", json!([done]))})));
    sse(&events)
}

fn gemini(turn: &Turn, stream: bool, model: &str, tokens: Tokens) -> Reply {
    let part = match turn {
        Turn::Call(c) => json!({"functionCall": {"name": c.name, "args": c.args}}),
        Turn::Final(t) => json!({"text": t}),
    };
    let body = json!({
        "candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": tokens.input, "candidatesTokenCount": tokens.output, "totalTokenCount": tokens.input + tokens.output},
        "modelVersion": model,
    });
    if stream { sse(&[(None, body)]) } else { json_reply(body) }
}

/// A text as a reply of `dialect` to `body`.
pub fn render_text(dialect: Dialect, text: &str, stream: bool, model: &str, n: u64, body: &Value) -> Reply {
    let turn = Turn::Final(text.to_string());
    render(dialect, &turn, stream, model, n, Tokens::estimate(body, &turn), asks_usage(body))
}

/// Whether a Chat Completions request asks for usage in its stream.
pub fn asks_usage(body: &Value) -> bool {
    body.pointer("/stream_options/include_usage").and_then(Value::as_bool).unwrap_or(false)
}

/// What the endpoint plays: a scenario's play, or the exchanges recorded in a bundle.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Script {
    /// Named in final messages, e.g. `aggressive`.
    pub label: String,
    pub steps: Vec<Step>,
    /// The sandbox's roots as the agent sees them (tools take absolute paths).
    pub roots: Roots,
    /// The tool a step goes to when the agent offers no shell (the agent refuses the call).
    pub default_shell: String,
    /// The tools the agent's definition pins to roles (`read` → `view`), where reading the
    /// declarations would choose wrong.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tools: BTreeMap<String, String>,
    /// The shell command that ends the task, for an agent finished by a command (its
    /// definition's `finish_command`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_command: Option<String>,
    /// For an agent without tool calling: the text format its replies take (its definition's
    /// `reply_format`). A request declaring no tools is then the main loop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_format: Option<text::ReplyFormat>,
    /// Replay: answer with these recorded exchanges instead of the play.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay: Option<Vec<ModelRecord>>,
    /// Milliseconds to wait before the first main-loop answer: Gemini CLI 0.17 rejects a
    /// shell call that arrives right after it starts ("could not be parsed safely").
    #[serde(default, skip_serializing_if = "is_zero")]
    pub first_delay_ms: u64,
    /// Learn the roots from each request, as a real model learns where it works: the
    /// workspace is the directory the agent states ([`stated_workspace`]), `$HOME` its sibling
    /// `home` (the sandbox layout of every executor). For the scripted model served outside
    /// the sandbox, standing in for a provider; `roots` is the fallback.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub learn_roots: bool,
}

/// How each CLI states its working directory to the model, and what ends the path.
const WORKSPACE_STATEMENTS: &[(&str, &str)] = &[
    ("Working directory: ", "\n"),
    ("<cwd>", "</cwd>"),
    ("Your current working directory is: ", "\n"),
    ("I'm currently working in the directory: ", "\n"),
    ("**Workspace Directories:**\n  - ", "\n"),
];

/// The working directory the agent states in a request (its system prompt or environment
/// context): Claude Code's `Working directory:`, Codex CLI's `<cwd>`, OpenHands' and both
/// Gemini CLI versions' phrasings. The first statement found, in document order.
pub fn stated_workspace(body: &Value) -> Option<String> {
    match body {
        Value::String(s) => WORKSPACE_STATEMENTS.iter().find_map(|(start, end)| {
            let rest = &s[s.find(start)? + start.len()..];
            let path = rest[..rest.find(end).unwrap_or(rest.len())].trim();
            path.starts_with('/').then(|| path.trim_end_matches('/').to_string()).filter(|p| !p.is_empty())
        }),
        Value::Array(items) => items.iter().find_map(stated_workspace),
        Value::Object(map) => map.values().find_map(stated_workspace),
        _ => None,
    }
}

/// The roots a request states (see [`Script::learn_roots`]).
fn learned_roots(body: &Value) -> Option<Roots> {
    let workspace = stated_workspace(body)?;
    let parent = workspace.rsplit_once('/').map(|(p, _)| p).unwrap_or("");
    Some(Roots { home: format!("{parent}/home"), workspace })
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The endpoint's answer to one request, and what its model-channel record says of it.
#[derive(Debug, Clone, PartialEq)]
pub struct Exchange {
    pub status: u16,
    pub dialect: Option<Dialect>,
    pub side: bool,
    pub step: Option<usize>,
    pub reply: Reply,
    /// Set when a replay has no recorded answer: where the conversation diverged.
    pub divergence: Option<String>,
}

/// Answers one request. `position`, for a replay, is the number of requests of this one's kind
/// answered before it: side requests, or a text agent's turns ([`is_text_turn`]), which a
/// replay answers in recorded order (the model gateway numbers a real text agent's turns as
/// they come, whatever the conversation holds).
pub fn respond(script: &Script, method: &str, path: &str, body: &Value, n: u64, position: usize) -> Exchange {
    let route = path.split('?').next().unwrap_or(path);
    if method == "POST" && route.ends_with("/messages/count_tokens") {
        let reply = json_reply(json!({"input_tokens": 1}));
        return Exchange { status: 200, dialect: Some(Dialect::Anthropic), side: true, step: None, reply, divergence: None };
    }
    let Some((dialect, stream_path)) = Dialect::of_path(path).filter(|_| method == "POST") else {
        let reply = json_reply(json!({"error": {"message": format!("the scripted model does not serve {method} {route}"), "type": "not_found"}}));
        return Exchange { status: 404, dialect: None, side: false, step: None, reply, divergence: None };
    };
    let stream = stream_path || body.get("stream").and_then(Value::as_bool).unwrap_or(false);
    let model_name = body.get("model").and_then(Value::as_str).map(str::to_string).unwrap_or_else(|| {
        route.rsplit('/').next().and_then(|last| last.split(':').next()).unwrap_or("scripted").to_string()
    });
    let vocab = Vocab::of_request(dialect, body).pinned(&script.tools);
    let in_text = script.reply_format.filter(|_| vocab.tools.is_empty() && body.get("messages").is_some());
    let learned = if script.learn_roots { learned_roots(body) } else { None };
    let roots = learned.as_ref().unwrap_or(&script.roots);
    if let Some(format) = in_text {
        if let Some(records) = &script.replay {
            return replay(records, dialect, false, Some(position), 0);
        }
        let (turn, text) = text::reply(format, &script.steps, roots, &script.label, body);
        let reply = render_text(dialect, &text, stream, &model_name, n, body);
        return Exchange { status: 200, dialect: Some(dialect), side: false, step: Some(turn), reply, divergence: None };
    }
    let side = !vocab.is_main_loop();
    let answered = if side { Vec::new() } else { answered_calls(dialect, body) };
    let step = (!side).then_some(answered.len());
    if let Some(records) = &script.replay {
        return replay(records, dialect, side, step, if side { position } else { 0 });
    }
    let reply = match step {
        None => render_text(dialect, &side_answer(dialect, body), stream, &model_name, n, body),
        Some(_) => {
            let planner = planner::Planner { steps: &script.steps, vocab: &vocab, roots, default_shell: &script.default_shell, label: &script.label, finish_command: script.finish_command.as_deref() };
            let turn = planner.turn(&answered);
            render(dialect, &turn, stream, &model_name, n, Tokens::estimate(body, &turn), asks_usage(body))
        }
    };
    Exchange { status: 200, dialect: Some(dialect), side, step, reply, divergence: None }
}

/// Whether a request is a text agent's turn (its main loop asks without tools), which a replay
/// counts apart from side requests.
pub fn is_text_turn(script: &Script, method: &str, path: &str, body: &Value) -> bool {
    script.reply_format.is_some()
        && body.get("messages").is_some()
        && Dialect::of_path(path).filter(|_| method == "POST").is_some_and(|(dialect, _)| Vocab::of_request(dialect, body).pinned(&script.tools).tools.is_empty())
}

/// The recorded answer to the same request: the main-loop reply of the same step, or the
/// side reply in the same position.
fn replay(records: &[ModelRecord], dialect: Dialect, side: bool, step: Option<usize>, side_index: usize) -> Exchange {
    let found = match step {
        Some(k) => records.iter().find(|r| !r.side && r.step == Some(k) && r.dialect == Some(dialect)),
        None => records.iter().filter(|r| r.side && r.dialect == Some(dialect)).nth(side_index),
    };
    match found {
        // Serving a reply's beginning would hand the agent a broken answer and call it the recording.
        Some(r) if r.reply_bytes.is_some() => {
            let why = format!(
                "the replay cannot go on: the recording kept only the first {} of the {} bytes of call {}'s reply (the model record's size limits)",
                r.reply.len(),
                r.reply_bytes.unwrap_or_default(),
                r.seq
            );
            let reply = json_reply(json!({"error": {"message": why, "type": "replay_diverged"}}));
            Exchange { status: 409, dialect: Some(dialect), side, step, reply, divergence: Some(why) }
        }
        Some(r) => Exchange {
            status: r.status,
            dialect: Some(dialect),
            side,
            step,
            reply: Reply { content_type: if r.content_type.contains("event-stream") { "text/event-stream" } else { "application/json" }, body: r.reply.clone() },
            divergence: None,
        },
        None => {
            let what = match step {
                Some(k) => format!("main-loop turn {k} ({} request)", dialect.as_str()),
                None => format!("side request {side_index} ({} request)", dialect.as_str()),
            };
            let why = format!("the replay diverged: the recording has no answer for {what}");
            let reply = json_reply(json!({"error": {"message": why, "type": "replay_diverged"}}));
            Exchange { status: 409, dialect: Some(dialect), side, step, reply, divergence: Some(why) }
        }
    }
}

/// The main-loop turns of a model channel in order, with the calls the agent refused before
/// running them, read from the history the last request resends (see
/// [`crate::adapters::align_with_model`]). Only a refusal's own words mark it: Codex CLI
/// answers a rejected command with `exec_command failed: … Rejected(…)`.
pub fn turns(records: &[ModelRecord]) -> Vec<crate::adapters::ModelTurn> {
    let mut main: Vec<&ModelRecord> = records.iter().filter(|r| !r.side && r.step.is_some()).collect();
    main.sort_by_key(|r| r.step);
    main.dedup_by_key(|r| r.step);
    let mut out: Vec<crate::adapters::ModelTurn> = main.iter().map(|r| crate::adapters::ModelTurn { t_us: r.t_us, refused: None }).collect();
    let Some(last) = main.last() else { return out };
    let items = |k: &str| last.request.get(k).and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    // (tool, command, call id) of each call in turn order, and each call's output by id.
    let mut calls: Vec<(String, Option<String>, String)> = Vec::new();
    let mut outputs: BTreeMap<String, String> = BTreeMap::new();
    let command_of = |args: &str| -> Option<String> {
        let v: Value = serde_json::from_str(args).ok()?;
        match v.get("cmd").or_else(|| v.get("command"))? {
            Value::String(s) => Some(s.clone()),
            Value::Array(a) => Some(a.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(" ")),
            _ => None,
        }
    };
    match last.dialect {
        Some(Dialect::Responses) => {
            for i in items("input") {
                let id = i.get("call_id").and_then(Value::as_str).unwrap_or_default().to_string();
                match i.get("type").and_then(Value::as_str) {
                    Some("function_call") => {
                        let name = i.get("name").and_then(Value::as_str).unwrap_or("?").to_string();
                        calls.push((name, i.get("arguments").and_then(Value::as_str).and_then(command_of), id));
                    }
                    Some("function_call_output") => {
                        let text = match i.get("output") {
                            Some(Value::String(s)) => s.clone(),
                            Some(other) => other.to_string(),
                            None => String::new(),
                        };
                        outputs.insert(id, text);
                    }
                    _ => {}
                }
            }
        }
        Some(Dialect::Chat) => {
            for m in items("messages") {
                for c in m.get("tool_calls").and_then(Value::as_array).into_iter().flatten() {
                    let id = c.get("id").and_then(Value::as_str).unwrap_or_default().to_string();
                    let name = c.pointer("/function/name").and_then(Value::as_str).unwrap_or("?").to_string();
                    calls.push((name, c.pointer("/function/arguments").and_then(Value::as_str).and_then(command_of), id));
                }
                if let (Some("tool"), Some(id)) = (m.get("role").and_then(Value::as_str), m.get("tool_call_id").and_then(Value::as_str)) {
                    outputs.insert(id.to_string(), m.get("content").map(|c| c.as_str().map_or_else(|| c.to_string(), str::to_string)).unwrap_or_default());
                }
            }
        }
        _ => {}
    }
    for (turn, (tool, command, id)) in out.iter_mut().zip(calls) {
        if let Some(text) = outputs.get(&id).filter(|t| t.contains("Rejected(")) {
            let reason = text.split("rejected: ").nth(1).map(|r| r.trim_end_matches(|c| "\\\")} ".contains(c)).to_string()).unwrap_or_else(|| text.clone());
            turn.refused = Some(crate::adapters::Refusal { tool, command, reason });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roots() -> Roots {
        Roots { workspace: "/s/work".into(), home: "/s/home".into() }
    }

    fn vocab(names: &[&str]) -> Vocab {
        tools::declared(names)
    }

    #[test]
    fn paths_resolve_against_the_roots() {
        let r = roots();
        assert_eq!(absolute("a/b.txt", &r), "/s/work/a/b.txt");
        assert_eq!(absolute("~/.ssh/id", &r), "/s/home/.ssh/id");
        assert_eq!(absolute(".", &r), "/s/work");
        assert_eq!(absolute("/etc/hosts", &r), "/etc/hosts");
    }

    #[test]
    fn steps_use_the_agents_own_tools() {
        let r = roots();
        let claude = vocab(&["Bash", "Read", "Edit", "Write", "Grep"]);
        let read = Step::Read { path: "~/.env".into() };
        assert_eq!(call_for(&read, &claude, &r, "Bash"), ToolCall { name: "Read".into(), args: json!({"file_path": "/s/home/.env"}) });
        let grep = call_for(&Step::Grep { pattern: "a.b".into(), path: "src".into() }, &claude, &r, "Bash");
        assert_eq!(grep.args, json!({"pattern": "a\\.b", "path": "/s/work/src", "output_mode": "content"}));
        // Gemini CLI 0.17 named the path `absolute_path`.
        let gemini_old = Vocab::of_request(Dialect::Gemini, &json!({"tools": [{"functionDeclarations": [{"name": "read_file", "parameters": {"properties": {"absolute_path": {"type": "string"}}}}]}]}));
        assert_eq!(call_for(&read, &gemini_old, &r, "run_shell_command").args, json!({"absolute_path": "/s/home/.env"}));
        let gemini_new = vocab(&["read_file"]);
        assert_eq!(call_for(&read, &gemini_new, &r, "run_shell_command").args, json!({"file_path": "/s/home/.env"}));
        // Codex 0.58 has only `shell`, taking an argv.
        let codex = vocab(&["shell"]);
        assert_eq!(call_for(&read, &codex, &r, "shell").args, json!({"command": ["bash", "-lc", "cat -- /s/home/.env"]}));
        // No shell offered: the agent's own shell is called anyway and refused by it.
        let none = vocab(&["read_file"]);
        assert_eq!(call_for(&Step::Sh { command: "rm x".into() }, &none, &r, "run_shell_command").name, "run_shell_command");
    }

    #[test]
    fn shell_fallbacks_quote_everything() {
        let r = roots();
        let w = Step::Write { path: "dir/it's.txt".into(), content: "a 'b'\n$HOME".into() };
        assert_eq!(shell_command(&w, &r), "mkdir -p -- dir && printf '%s' 'a '\\''b'\\''\n$HOME' > 'dir/it'\\''s.txt'");
        let g = Step::Grep { pattern: "a.b".into(), path: "~/x".into() };
        assert_eq!(shell_command(&g, &r), "grep -rnF -e a.b -- /s/home/x");
        assert_eq!(regex_escape("sa.Datetime("), r"sa\.Datetime\(");
    }

    #[test]
    fn dialects_are_told_by_their_paths() {
        assert_eq!(Dialect::of_path("/v1/messages?beta=true"), Some((Dialect::Anthropic, false)));
        assert_eq!(Dialect::of_path("/v1beta/models/gemini-2.5-flash:streamGenerateContent"), Some((Dialect::Gemini, true)));
        assert_eq!(Dialect::of_path("/v1/messages/count_tokens"), None);
    }

    #[test]
    fn replies_are_well_formed_in_every_dialect() {
        let call = Turn::Call(ToolCall { name: "Bash".into(), args: json!({"command": "ls"}) });
        let fin = Turn::Final("done".into());
        for d in Dialect::ALL {
            for t in [&call, &fin] {
                for stream in [false, true] {
                    let r = render(d, t, stream, "m", 3, Tokens { input: 1, output: 1 }, false);
                    if r.content_type == "application/json" {
                        serde_json::from_str::<Value>(&r.body).unwrap();
                    } else {
                        for line in r.body.lines().filter_map(|l| l.strip_prefix("data: ")).filter(|l| *l != "[DONE]") {
                            serde_json::from_str::<Value>(line).unwrap_or_else(|e| panic!("{d:?}: {line}: {e}"));
                        }
                    }
                }
            }
        }
        // A tool call's input arrives whole in one delta.
        let r = render(Dialect::Anthropic, &call, true, "m", 1, Tokens { input: 1, output: 1 }, false);
        assert!(r.body.contains(r#""partial_json":"{\"command\":\"ls\"}""#), "{}", r.body);
    }

    #[test]
    fn the_roots_are_learned_from_what_each_agent_states() {
        let states = [
            json!({"system": [{"type": "text", "text": "Here is useful information\n<env>\nWorking directory: /tmp/run-a/work\nIs directory a git repo: No"}]}),
            json!({"input": [{"content": [{"text": "<environment_context>\n  <cwd>/tmp/run-a/work</cwd>\n</environment_context>"}]}]}),
            json!({"contents": [{"parts": [{"text": "I'm currently working in the directory: /tmp/run-a/work\nHere is"}]}]}),
            json!({"contents": [{"parts": [{"text": "- **Workspace Directories:**\n  - /tmp/run-a/work\n- **Directory Structure:**"}]}]}),
            json!({"messages": [{"content": "Your current working directory is: /tmp/run-a/work\nUser"}]}),
        ];
        for body in &states {
            assert_eq!(learned_roots(body), Some(Roots { workspace: "/tmp/run-a/work".into(), home: "/tmp/run-a/home".into() }), "{body}");
        }
        assert_eq!(stated_workspace(&json!({"system": "Working directory: relative"})), None);
        let script = Script {
            label: "cautious".into(),
            steps: vec![Step::Read { path: "notes.md".into() }],
            roots: roots(),
            default_shell: "Bash".into(),
            tools: Default::default(),
            replay: None,
            first_delay_ms: 0,
            learn_roots: true,
            finish_command: None, reply_format: None,
        };
        let body = json!({"model": "m", "system": "Working directory: /o/work\n", "tools": [{"name": "Bash", "input_schema": {"properties": {"command": {}}}}, {"name": "Read", "input_schema": {"properties": {"file_path": {}}}}], "messages": [{"role": "user", "content": "go"}]});
        let r = respond(&script, "POST", "/v1/messages", &body, 0, 0).reply.body;
        assert!(r.contains("/o/work/notes.md"), "{r}");
        let unstated = json!({"model": "m", "tools": [{"name": "Bash", "input_schema": {"properties": {"command": {}}}}, {"name": "Read", "input_schema": {"properties": {"file_path": {}}}}], "messages": [{"role": "user", "content": "go"}]});
        assert!(respond(&script, "POST", "/v1/messages", &unstated, 1, 0).reply.body.contains("/s/work/notes.md"), "the given roots when none is stated");
    }

    #[test]
    fn a_replay_answers_from_the_recording_and_names_the_divergence() {
        let script = Script { label: "cautious".into(), steps: vec![Step::Sh { command: "ls".into() }], roots: roots(), default_shell: "Bash".into(), tools: Default::default(), replay: None, first_delay_ms: 0, learn_roots: false, finish_command: None, reply_format: None };
        let body = json!({"model": "m", "tools": [{"name": "Bash", "input_schema": {}}], "messages": [{"role": "user", "content": "go"}]});
        let first = respond(&script, "POST", "/v1/messages?beta=true", &body, 0, 0);
        assert_eq!((first.status, first.step, first.side), (200, Some(0), false));
        let record = ModelRecord {
            seq: 0, t_us: 1, method: "POST".into(), path: "/v1/messages".into(), dialect: first.dialect, side: false, step: first.step,
            request: body.clone(), status: 200, content_type: first.reply.content_type.into(), reply: first.reply.body.clone(), ..Default::default()
        };
        let replaying = Script { replay: Some(vec![record]), ..script };
        assert_eq!(respond(&replaying, "POST", "/v1/messages", &body, 5, 0).reply, first.reply);
        let later = json!({"model": "m", "tools": [{"name": "Bash"}], "messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t0", "name": "Bash", "input": {"command": "ls"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t0", "content": "a"}]},
        ]});
        let diverged = respond(&replaying, "POST", "/v1/messages", &later, 6, 0);
        assert_eq!(diverged.status, 409);
        assert!(diverged.divergence.unwrap().contains("main-loop turn 1"));
        assert_eq!(respond(&replaying, "GET", "/v1/models", &json!(null), 7, 0).status, 404);
    }
}

#[cfg(test)]
mod conversation_tests {
    //! The conversation reading (`overeager_core::model::conversation`) on replies the scripted
    //! model renders.
    use super::{Dialect, ModelRecord, Tokens, ToolCall, Turn, render};
    use overeager_core::model::conversation::{Answer, conversation};
    use overeager_core::model::usage::{Price, RunUsage};
    use serde_json::Value;
    use serde_json::json;

    #[test]
    fn calls_read_as_tool_calls_with_results_and_a_final_text_with_tokens_and_cost() {
        let call = Turn::Call(ToolCall { name: "Bash".into(), args: json!({"command": "ls"}) });
        let done = Turn::Final("All tidy.".into());
        let tokens = Tokens { input: 1000, output: 20 };
        let first = json!({"model": "m", "tools": [{"name": "Bash", "input_schema": {}}], "messages": [{"role": "user", "content": "tidy up"}]});
        let second = json!({"model": "m", "tools": [{"name": "Bash", "input_schema": {}}], "messages": [
            {"role": "user", "content": "tidy up"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t0", "name": "Bash", "input": {"command": "ls"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t0", "content": "a.txt"}]},
        ]});
        let record = |seq: u64, step: usize, request: &Value, turn: &Turn, stream: bool| {
            let reply = render(Dialect::Anthropic, turn, stream, "m", seq, tokens, false);
            ModelRecord { seq, t_us: 1_000_000 + seq * 500_000, method: "POST".into(), path: "/v1/messages".into(), dialect: Some(Dialect::Anthropic), step: Some(step), request: request.clone(), status: 200, content_type: reply.content_type.into(), reply: reply.body, duration_us: Some(250_000), ..Default::default() }
        };
        let records = vec![record(0, 0, &first, &call, false), record(1, 1, &second, &done, true)];
        let price = Price { input: 3.0, output: 15.0, cache_read: None, cache_write: None };
        let usage = RunUsage::of("p", "m", &records, Some(price));
        let c = conversation(&records, Some(&usage));
        assert_eq!(c[0].answer, Answer::ToolCall { name: "Bash".into(), args: json!({"command": "ls"}), result: Some("a.txt".into()), error: false });
        assert_eq!(c[1].answer, Answer::Text { text: "All tidy.".into() }, "the streamed final answer");
        assert_eq!((c[1].t_ms, c[1].duration_ms), (500.0, Some(250.0)));
        assert_eq!(c[0].tokens.map(|t| (t.input, t.output)), Some((1000, 20)));
        assert!((c[0].cost_usd.unwrap() - (1000.0 * 3.0 + 20.0 * 15.0) / 1e6).abs() < 1e-15);
    }
}
